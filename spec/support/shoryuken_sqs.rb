# frozen_string_literal: true

require "json"
require "rbconfig"
require "securerandom"
require "tmpdir"
require "fileutils"
require_relative "processes"
require_relative "moto_server"
require_relative "tcp_gate"
require_relative "rails_version"

module FerrolockTest
  # Real Shoryuken 7.0.3 processes (vendored, unmodified; Ruby >= 3.2, so the modern root) consuming
  # real queues of a real SQS-compatible server (moto, spec/support/moto_server.rb). The example
  # process talks to moto with the vendored aws-sdk-sqs 1.87.0 (Debian's aws-sdk-core under it) to
  # make queues, send messages and read what is left; the workers record what ran in Redis
  # (spec/support/shoryuken_sqs_app.rb). A Run may use the vendored Shoryuken 6.2.1 instead
  # (Run#shoryuken_version=): its processes then load 6.2.1's lib and run its bin/shoryuken, on the same
  # aws-sdk-sqs 1.87.0 (6.2.1 asks only for aws-sdk-core >= 2 and requires aws-sdk-sqs).
  module ShoryukenSqs
    VENDOR = File.expand_path("../shared/vendor", ROOT)
    VERSIONS = %w[7.0.3 6.2.1].freeze
    SQS_LIB = File.join(VENDOR, "aws-sdk-sqs-1.87.0", "lib")
    APP = File.expand_path("shoryuken_sqs_app.rb", __dir__)
    ACTIVE_JOB_APP = File.expand_path("shoryuken_sqs_active_job_app.rb", __dir__)

    module_function

    # Why the lane cannot run here, or nil.
    def missing
      return "Shoryuken 7 needs Ruby >= 3.2 (bin/modern run …)" if RUBY_VERSION < "3.2"

      VERSIONS.each do |version|
        dir = dir(version)
        return "vendored Shoryuken #{version} not found at #{dir}" unless File.directory?(dir)
      end
      return "vendored aws-sdk-sqs not found at #{SQS_LIB}" unless File.directory?(SQS_LIB)

      MotoServer.missing
    end

    # The vendored Shoryuken `version` (one of VERSIONS).
    def dir(version)
      VERSIONS.include?(version) or raise ArgumentError, "no vendored Shoryuken #{version} (#{VERSIONS.join(", ")})"
      File.join(VENDOR, "shoryuken-#{version}")
    end

    # aws-sdk-core (Debian's: not in the Gemfile) and the vendored aws-sdk-sqs, in this bundled process:
    # the load path that plain RubyGems gives a process requiring aws-sdk-core, added to ours.
    def load_sdk
      return if defined?(Aws::SQS::Client)

      probe = [RbConfig.ruby, "-e", 'require "aws-sdk-core"; puts $LOAD_PATH']
      paths = IO.popen(FerrolockTest.unbundled_env, probe, &:read)
      (paths.split("\n") - $LOAD_PATH).reverse_each { |path| $LOAD_PATH.unshift(path) }
      $LOAD_PATH.unshift(SQS_LIB)
      require "aws-sdk-core"
      require "aws-sdk-sqs"
    end

    # One scenario: a moto server, queues on it, Shoryuken processes. Stops all of them at #close.
    class Run
      attr_reader :moto, :sqs, :redis, :logs
      # The vendored Shoryuken its processes run (VERSIONS; 7.0.3 unless set).
      attr_accessor :shoryuken_version

      def initialize(redis_server)
        ShoryukenSqs.load_sdk
        @redis_server = redis_server
        @redis = redis_server.redis
        @moto = MotoServer.new.start
        @sqs = Aws::SQS::Client.new(endpoint: moto.endpoint, region: "us-east-1",
                                    credentials: Aws::Credentials.new("test", "test"))
        @logs = Dir.mktmpdir("ferrolock-shoryuken-sqs-")
        @pids = []
        @gates = []
        @shoryuken_version = VERSIONS.first
      end

      # A queue; attributes in SQS's names ("VisibilityTimeout" => "1", "FifoQueue" => "true").
      def queue(name, **attributes)
        attributes = attributes.transform_keys(&:to_s).transform_values(&:to_s)
        @sqs.create_queue(queue_name: name, attributes: attributes).queue_url
      end

      def send_bodies(url, bodies, **extra)
        bodies.each_slice(10) do |slice|
          entries = slice.each_with_index.map do |body, i|
            { id: i.to_s, message_body: JSON.generate(body) }.merge(extra.is_a?(Proc) ? extra.call(body) : extra)
          end
          failed = @sqs.send_message_batch(queue_url: url, entries: entries).failed
          raise "send_message_batch failed: #{failed.map(&:message)}" unless failed.empty?
        end
      end

      # [visible, in flight] messages of the queue, as SQS counts them.
      def depth(url)
        attributes = @sqs.get_queue_attributes(
          queue_url: url, attribute_names: %w[ApproximateNumberOfMessages ApproximateNumberOfMessagesNotVisible]
        ).attributes
        [Integer(attributes["ApproximateNumberOfMessages"]),
         Integer(attributes["ApproximateNumberOfMessagesNotVisible"])]
      end

      # A gate (spec/support/tcp_gate.rb) in front of moto, for processes that must lose SQS for a while.
      def gate
        TcpGate.new(MotoServer::HOST, moto.port).start.tap { |gate| @gates << gate }
      end

      # Starts `shoryuken -r app -q QUEUE… -c concurrency` for `workers` (queue name => the worker's
      # settings, see spec/support/shoryuken_sqs_app.rb); returns its pid. ActiveJob (ACTIVE_JOB_APP):
      # no workers of the app's own, `queues` instead.
      def shoryuken(workers, concurrency: 10, endpoint: moto.endpoint, env: {}, app: APP, queues: workers.keys)
        log = File.join(@logs, "shoryuken-#{@pids.size}.log")
        cmd = [RbConfig.ruby, File.join(shoryuken_dir, "bin", "shoryuken"), "start", "-r", app, "-q", *queues,
               "-c", concurrency.to_s, "-t", "8"]
        pid = Process.spawn(FerrolockTest.unbundled_env(app_env(workers, endpoint, queues).merge(env)), *cmd,
                            chdir: ROOT, pgroup: true, out: log, err: %i[child out])
        @pids << pid
        pid
      end

      # ACTIVE_JOB_APP as the producer: enqueues `jobs` ([[queue, job class, arguments, times]…]) through
      # Shoryuken's ActiveJob adapter, in a process of its own, and waits for it.
      def enqueue_active_jobs(jobs, timeout: 30, env: {})
        log = File.join(@logs, "producer.log")
        env = app_env({}, moto.endpoint, []).merge("FERROLOCK_SQS_ENQUEUE" => JSON.generate(jobs), **env)
        pid = Process.spawn(FerrolockTest.unbundled_env(env), RbConfig.ruby, ACTIVE_JOB_APP,
                            chdir: ROOT, pgroup: true, out: log, err: %i[child out])
        status = wait_exit(pid, timeout)
        raise "the producer failed (#{status.inspect}):\n#{File.read(log)}" unless status&.success?
      end

      # The environment of the apps' processes. The vendored Rails 8.1 goes first on RUBYLIB under
      # FERROLOCK_RAILS=8.1 (Shoryuken 7.0.3 runs on Rails 7.2 to 8.1; continuations need 8.1).
      def app_env(workers, endpoint, queues)
        { "REDIS_URL" => @redis_server.url, "FERROLOCK_RECORD_URL" => @redis_server.url,
          "FERROLOCK_SQS_ENDPOINT" => endpoint, "FERROLOCK_SQS_WORKERS" => JSON.generate(workers),
          "FERROLOCK_SQS_QUEUES" => queues.join(","),
          "RUBYLIB" => [*RailsVersion.libs, SQS_LIB, File.join(shoryuken_dir, "lib"), LIB].join(":") }
      end

      def shoryuken_dir
        ShoryukenSqs.dir(shoryuken_version)
      end

      # The exit status of child `pid` within `timeout` seconds, or nil (it is killed then).
      def wait_exit(pid, timeout)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
        until (status = Process.waitpid2(pid, Process::WNOHANG)&.last)
          if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
            Process.kill("KILL", -pid)
            Process.waitpid(pid)
            return nil
          end
          sleep 0.05
        end
        status
      end

      # Waits until the block is true (polling), failing after `timeout` seconds with `what` and the logs.
      def wait_for(what, timeout:, every: 0.2)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
        loop do
          return if yield
          if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
            raise "#{what}: not within #{timeout}s\n#{log_tails}"
          end

          sleep every
        end
      end

      # What the workers recorded (spec/support/shoryuken_sqs_app.rb).
      def record
        starts = @redis.lrange("rec:starts", 0, -1)
        done = @redis.lrange("rec:done", 0, -1)
        events = @redis.scan_each(match: "rec:event:*").to_a.uniq.to_h do |key|
          [key.delete_prefix("rec:event:"), Integer(@redis.get(key))]
        end
        { starts: starts, done: done, overlaps: @redis.lrange("rec:overlaps", 0, -1), events: events }
      end

      # Signals the process group of a Shoryuken process; after KILL, reaps it (a zombie would still
      # look alive to the workers' overlap check).
      def kill(pid, signal = "KILL")
        Process.kill(signal, -pid)
        return unless signal == "KILL"

        Process.waitpid(pid)
        @pids.delete(pid)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      end

      # The exit status of Shoryuken process `pid` (after a TERM: Shoryuken's graceful shutdown), or nil
      # when it did not exit within `timeout` seconds (it is killed then).
      def reap(pid, timeout: 20)
        status = wait_exit(pid, timeout)
        @pids.delete(pid)
        status
      end

      # TERM to every Shoryuken process (its graceful shutdown), KILL after 15 s.
      def stop_processes
        @pids.each { |pid| kill(pid, "TERM") }
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 15
        @pids.each do |pid|
          until Process.waitpid(pid, Process::WNOHANG)
            if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
              kill(pid, "KILL")
              Process.waitpid(pid)
              break
            end
            sleep 0.05
          end
        rescue Errno::ECHILD
          next
        end
        @pids.clear
      end

      def log_tails
        Dir[File.join(@logs, "*.log")].map do |path|
          "--- #{File.basename(path)}\n#{File.readlines(path).last(40).join}"
        end.join("\n")
      end

      # Each part in its own ensure: an example's time limit may cut the teardown short, and moto or
      # the log folder must not outlive the example then.
      def close
        stop_processes
        @gates.each(&:stop)
      ensure
        begin
          @moto.stop
        ensure
          FileUtils.rm_rf(@logs)
        end
      end
    end
  end
end
