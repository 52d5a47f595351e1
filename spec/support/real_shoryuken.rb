# frozen_string_literal: true

require "json"
require_relative "processes"

module FerrolockTest
  # Runs scenarios against the REAL, vendored Shoryuken 6.2.1, each in a child process: its
  # dependencies (Debian's aws-sdk-core...) are not in the Gemfile, so the child runs outside
  # `bundle exec`. The child boots spec/support/real_shoryuken_boot.rb, runs the scenario code and
  # prints one JSON line.
  module RealShoryuken
    DIR = File.expand_path("../shared/vendor/shoryuken-6.2.1", ROOT)
    BOOT = File.expand_path("real_shoryuken_boot.rb", __dir__)

    module_function

    # Why the real-Shoryuken specs cannot run here, or nil.
    def missing
      return "vendored Shoryuken 6.2.1 not found at #{DIR}" unless File.directory?(File.join(DIR, "lib"))

      nil
    end

    # For examples: runs `code` after the boot file; returns the Hash it reported, or skips the
    # example when the child could not load aws-sdk-core.
    def run(example, code, env: {}, timeout: 45)
      reason = missing
      example.skip(reason) if reason
      out = example.run_ruby!("load #{BOOT.dump}\n#{code}", env: child_env(env), timeout: timeout, unbundled: true)
      result = JSON.parse(out.lines.last || "{}")
      example.skip(result["skip"]) if result["skip"]
      result
    end

    # Starts `code` (after the boot file) in the background, in its own process group, output to
    # log_path; returns its pid. For a child the example kills.
    def spawn(code, log_path:, env: {})
      env = FerrolockTest.unbundled_env({ "REDIS_URL" => FerrolockTest.redis_server.url }.merge(child_env(env)))
      Process.spawn(env, RbConfig.ruby, "-I", LIB, "-e", "load #{BOOT.dump}\n#{code}",
                    chdir: ROOT, pgroup: true, out: log_path, err: %i[child out])
    end

    def child_env(env)
      { "FERROLOCK_SHORYUKEN_DIR" => DIR }.merge(env)
    end

    # Scenario code defining worker class `name` on `queue` with shoryuken_options `options` (Ruby
    # source of a Hash's contents), counting its runs per message id in `run`; `extra` is the tail
    # of its perform.
    def worker_code(name, queue, options, extra = "")
      <<~RUBY
        require "securerandom"
        class #{name}
          include Shoryuken::Worker
          shoryuken_options({ queue: #{queue.dump} }.merge(#{options}))
          def perform(sqs_msg, body)
            id = sqs_msg.is_a?(Array) ? "batch" : sqs_msg.message_id
            run = RealShoryuken.ran(id)
            #{extra}
          end
        end
      RUBY
    end

    # For the real-Shoryuken spec files.
    module Examples
      def scenario(code, env: {}, timeout: 45)
        RealShoryuken.run(self, code, env: env, timeout: timeout)
      end

      def worker(name, queue, options, extra = "")
        RealShoryuken.worker_code(name, queue, options, extra)
      end

      # Skips now (before any child or thread starts) when the vendored Shoryuken is absent.
      def skip_without_real_shoryuken
        reason = RealShoryuken.missing
        skip(reason) if reason
      end

      # A scenario in a thread; a skip (aws-sdk-core missing) reaches the example through #value.
      def scenario_thread(code, **options)
        Thread.new do
          Thread.current.report_on_exception = false
          scenario(code, **options)
        end
      end
    end
  end
end
