# frozen_string_literal: true

require "json"
require_relative "processes"

module FerrolockTest
  # Runs scenarios against the REAL, vendored Shoryuken 6.2.1, each in a child process (the
  # real gem would clash with the stand-in of spec/support/shoryuken_chain.rb). The child boots
  # spec/support/real_shoryuken_boot.rb, runs the scenario code and prints one JSON line.
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
      # Unbundling restores the environment rspec started with: keep the child on the test Redis.
      env = { "FERROLOCK_SHORYUKEN_DIR" => DIR, "FERROLOCK_REDIS_URL" => nil }.merge(env)
      out = unbundled { example.run_ruby!("load #{BOOT.dump}\n#{code}", env: env, timeout: timeout) }
      result = JSON.parse(out.lines.last || "{}")
      example.skip(result["skip"]) if result["skip"]
      result
    end

    # Shoryuken's dependencies (Debian's aws-sdk-core, concurrent-ruby, thor) are not in the
    # Gemfile: the child runs with plain RubyGems, not under `bundle exec`.
    def unbundled(&block)
      defined?(Bundler) ? Bundler.with_unbundled_env(&block) : yield
    end
  end
end
