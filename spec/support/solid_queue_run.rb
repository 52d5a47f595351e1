# frozen_string_literal: true

require "json"
require "open3"
require "rbconfig"
require "tmpdir"
require "fileutils"
require "io/wait"
require_relative "processes"
require_relative "rails_version"

module FerrolockTest
  # Real Solid Queue 1.5.0 processes (vendored, unmodified, with fugit 1.14.0; Ruby >= 3.2 and Rails >= 7.1,
  # so the modern root, whose Debian testing gives Rails 7.2, ActiveRecord and sqlite3) running the app of
  # spec/fixtures/solid_queue_app on a SQLite database of their own. Its processes run outside Bundler
  # (ActiveRecord and sqlite3 are not in the Gemfile). The example talks to the app through a Console:
  # the app's enqueuing side, which evaluates the code it is sent.
  module SolidQueueRun
    VENDOR = File.expand_path("../shared/vendor", ROOT)
    LIBS = [File.join(VENDOR, "solid_queue-1.5.0", "lib"), File.join(VENDOR, "fugit-1.14.0", "lib")].freeze
    APP = File.expand_path("../fixtures/solid_queue_app", __dir__)

    module_function

    # Why the lane cannot run here, or nil.
    def missing
      return "Solid Queue 1.5 needs Ruby >= 3.2 (bin/modern run …)" if RUBY_VERSION < "3.2"

      dir = LIBS.find { |lib| !File.directory?(lib) }
      return "vendored #{File.basename(File.dirname(dir))} not found at #{dir}" if dir

      probe = [RbConfig.ruby, "-e", 'require "active_record"; require "sqlite3"; require "et-orbi"; require "raabro"']
      _, status = Open3.capture2e(FerrolockTest.unbundled_env, *probe)
      "ActiveRecord, sqlite3, et-orbi or raabro not installed (Debian testing's ruby-* packages)" unless status.success?
    end

    # One scenario: a database, the console, a supervisor. #close stops them and removes the folder.
    class Run
      attr_reader :dir, :console

      # rails: "8.1" puts the vendored Rails 8.1 first (under Debian's ActiveRecord 7.2).
      def initialize(redis_server, env: {}, rails: nil)
        @dir = Dir.mktmpdir("ferrolock-solid-queue-")
        rails_libs = RailsVersion::FRAMEWORKS.map { |name| File.join(RailsVersion::VENDOR, name, "lib") }
        rails_libs = [] unless rails == "8.1"
        # Transactions BEGIN IMMEDIATE, as Rails 8 has it for SQLite: a deferred one that reads and then
        # writes fails at once (BusyException, no busy wait) when another process wrote meanwhile.
        database = "sqlite3:#{File.join(@dir, "queue.sqlite3")}?pool=20&timeout=10000"
        database += "&default_transaction_mode=immediate"
        @env = { "REDIS_URL" => redis_server.url, "SQ_LOG" => File.join(@dir, "app.log"), "DATABASE_URL" => database,
                 "RUBYLIB" => [*rails_libs, *LIBS, LIB].join(":") }.merge(env)
        @supervisors = []
        @console = Console.new(child_env, File.join(@dir, "console.log"))
      end

      # Starts a supervisor (a dispatcher and `workers` worker processes of `threads` threads) and waits
      # until Solid Queue has registered them; returns its pid.
      def supervisor(workers: 1, threads: 5, env: {})
        log = File.join(@dir, "supervisor-#{@supervisors.size}.log")
        env = child_env.merge("SQ_WORKERS" => workers.to_s, "SQ_THREADS" => threads.to_s, **env)
        pid = Process.spawn(env, RbConfig.ruby, File.join(APP, "supervisor.rb"),
                            chdir: ROOT, pgroup: true, out: log, err: %i[child out])
        @supervisors << pid
        wait_for("#{workers} worker(s) and a dispatcher registered", timeout: 60) do
          raise "the supervisor exited:\n#{log_tails}" if Process.waitpid(pid, Process::WNOHANG)

          workers(pid).size == workers && registered?("Dispatcher", pid)
        end
        pid
      end

      # The pids of the live worker processes of supervisor `pid`, as Solid Queue registered them.
      def workers(pid)
        console.evaluate(<<~RUBY)
          supervisor = SolidQueue::Process.where("kind LIKE ?", "Supervisor%").find_by(pid: #{pid})
          supervisor ? SolidQueue::Process.where(kind: "Worker", supervisor_id: supervisor.id).pluck(:pid) : []
        RUBY
      end

      def registered?(kind, pid)
        console.evaluate(<<~RUBY)
          supervisor = SolidQueue::Process.where("kind LIKE ?", "Supervisor%").find_by(pid: #{pid})
          supervisor ? SolidQueue::Process.exists?(kind: #{kind.dump}, supervisor_id: supervisor.id) : false
        RUBY
      end

      # Waits until the block is true (polling), failing after `timeout` seconds with `what` and the logs.
      def wait_for(what, timeout:, every: 0.1)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
        until yield
          now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          raise "#{what}: not within #{timeout}s\n#{log_tails}" if now > deadline

          sleep every
        end
      end

      def log_tails
        Dir[File.join(@dir, "*.log")].map do |path|
          "--- #{File.basename(path)}\n#{File.readlines(path).last(20).join}"
        end.join("\n")
      end

      # TERM to every supervisor (Solid Queue's graceful stop of its forks), KILL to its group after 15 s;
      # then the console. Each part in its own ensure: a time limit may cut the teardown short.
      def close
        @supervisors.each { |pid| signal(pid, "TERM") }
        @supervisors.each { |pid| signal(pid, "KILL") unless exited?(pid, 15) } # rubocop:disable Style/CombinableLoops -- all TERMed first
      ensure
        begin
          @console&.close
        ensure
          FileUtils.rm_rf(@dir)
        end
      end

      private

      def child_env
        FerrolockTest.unbundled_env(@env)
      end

      def signal(pid, name)
        Process.kill(name, -pid)
      rescue Errno::ESRCH
        nil
      end

      def exited?(pid, timeout)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
        until Process.waitpid(pid, Process::WNOHANG)
          return false if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

          sleep 0.05
        end
        true
      rescue Errno::ECHILD
        true
      end
    end

    # spec/fixtures/solid_queue_app/console.rb in a process of its own: #evaluate sends it Ruby code and
    # returns the value (JSON's types as they are, anything else as its inspect).
    class Console
      def initialize(env, log)
        @log = log
        @stdin, @stdout, @wait = Open3.popen2(env, RbConfig.ruby, File.join(APP, "console.rb"),
                                              chdir: ROOT, pgroup: true, err: log)
        answer(60)
      end

      def evaluate(code, timeout: 30)
        @stdin.puts(JSON.generate(code))
        answer(timeout)
      end

      def pid = @wait.pid

      def close
        @stdin.close unless @stdin.closed?
        return if @wait.join(10)

        Process.kill("KILL", -@wait.pid)
        @wait.join
      rescue Errno::ESRCH
        nil
      end

      private

      def answer(timeout)
        raise "the console gave no answer within #{timeout}s:\n#{tail}" unless @stdout.wait_readable(timeout)

        line = @stdout.gets or raise "the console ended:\n#{tail}"
        reply = JSON.parse(line)
        raise "the console raised #{reply["error"]}" if reply.key?("error")

        reply["ok"]
      end

      def tail
        File.exist?(@log) ? File.readlines(@log).last(30).join : ""
      end
    end
  end
end
