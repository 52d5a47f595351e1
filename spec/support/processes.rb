# frozen_string_literal: true

require "fileutils"
require "open3"
require "rbconfig"
require "timeout"
require_relative "sidekiq_version"

module FerrolockTest
  ROOT = File.expand_path("../..", __dir__)
  LIB = File.join(ROOT, "lib")

  # What the suite takes out of the environment it was started with (spec_helper): the test server
  # only, no cluster, sentinels or namespace from the caller's shell.
  NOT_INHERITED = /\AFERROLOCK_(REDIS_|NAMESPACE\z)/

  # The whole environment of a child started outside Bundler (plain RubyGems: Debian's gems that are
  # not in the Gemfile): the one rspec started with, less Bundler's variables and NOT_INHERITED, plus
  # spec_helper's FERROLOCK_HISTORY and `env`; what ENV has beyond it is unset (nil), so spawn needs no option. Never
  # Bundler.with_unbundled_env: it swaps ENV, which every thread shares, so another thread meanwhile
  # finds no REDIS_URL (Sidekiq's pool is built for localhost:6379, for good), and two threads'
  # overlapping swaps leave it swapped.
  def self.unbundled_env(env = {})
    started = (defined?(Bundler) ? Bundler.unbundled_env : ENV.to_h).reject { |name, _| NOT_INHERITED.match?(name) }
    ENV.keys.to_h { |name| [name, nil] }.merge(started, ENV.slice("FERROLOCK_HISTORY"), env)
  end

  # Runs Ruby code in a separate process with lib/ on the load path; returns
  # [stdout, stderr, status]. The code sees ENV["REDIS_URL"] = the test server; `unbundled: true`
  # runs it outside Bundler (FerrolockTest.unbundled_env).
  module Processes
    def run_ruby(code, env: {}, timeout: 30, unbundled: false)
      env = { "REDIS_URL" => FerrolockTest.redis_server.url }.merge(env)
      env = FerrolockTest.unbundled_env(env) if unbundled
      cmd = [RbConfig.ruby, "-I", LIB, "-e", code]
      Open3.popen3(env, *cmd, chdir: ROOT, pgroup: true) do |stdin, stdout, stderr, wait|
        stdin.close
        out = Thread.new { stdout.read }
        err = Thread.new { stderr.read }
        unless wait.join(timeout)
          Process.kill("KILL", -wait.pid)
          raise "ruby subprocess did not finish within #{timeout}s: #{code[0, 200]}"
        end
        [out.value, err.value, wait.value]
      end
    end

    # Like #run_ruby but fails the example unless the process exits 0.
    def run_ruby!(code, **options)
      out, err, status = run_ruby(code, **options)
      raise "ruby subprocess failed (#{status.exitstatus}):\n#{err}\n#{out}" unless status.success?

      out
    end

    # A forked child running the block: exits 0, or 1 after printing what it raised.
    def fork_child
      fork do
        yield
        exit!(0)
      rescue Exception => e # rubocop:disable Lint/RescueException
        warn "child failed: #{e.class}: #{e.message}"
        exit!(1)
      end
    end

    # Fails the example unless every forked child exits 0 within `timeout` seconds each.
    def expect_children_succeed(pids, timeout: 40)
      pids.each do |pid|
        _, status = Timeout.timeout(timeout) { Process.wait2(pid) }
        raise "child #{pid} failed: #{status.inspect}" unless status.success?
      end
    end

    # Starts `sidekiq -r <app>` against the test Redis; yields it and stops it.
    def with_sidekiq(app, **options)
      process = SidekiqProcess.new(app, **options)
      process.start
      yield process
    ensure
      process&.stop
    end
  end

  # A real Sidekiq server process (the installed sidekiq: 6.4.1 on the host, 8.1 in bin/modern; or the
  # vendored 7.3.10), stopped with TERM then KILL.
  class SidekiqProcess
    attr_reader :log_path, :pid

    # Debian's `sidekiq`, or the vendored 7.3 one with FERROLOCK_SIDEKIQ=7 (spec/support/sidekiq_version.rb).
    def self.command
      SidekiqVersion.server_command
    end

    def initialize(app, concurrency: 5, queues: ["default"], env: {}, shutdown_timeout: 5)
      @app = File.expand_path(app, ROOT)
      @concurrency = concurrency
      @queues = queues
      @env = { "REDIS_URL" => FerrolockTest.redis_server.url, "RUBYLIB" => SidekiqVersion.rubylib(LIB) }.merge(env)
      @shutdown_timeout = shutdown_timeout
      @log_path = File.join(Dir.mktmpdir("ferrolock-sidekiq-"), "sidekiq.log")
      # Examples read the log after stop: it goes when this process ends.
      owner = Process.pid
      log_dir = File.dirname(@log_path)
      at_exit { FileUtils.rm_rf(log_dir) if Process.pid == owner }
    end

    def start(boot_timeout: 20)
      args = [*self.class.command, "-r", @app, "-c", @concurrency.to_s, "-t", @shutdown_timeout.to_s]
      @queues.each { |queue| args.push("-q", queue) }
      @pid = Process.spawn(@env, *args, chdir: ROOT, out: log_path, err: %i[child out], pgroup: true)
      owner = Process.pid
      at_exit { stop(timeout: 2) if Process.pid == owner }
      wait_until_registered(boot_timeout)
      self
    end

    # Sidekiq's identity in Redis ("host:pid:nonce"), once its first heartbeat is in.
    def identity
      FerrolockTest.redis_server.redis.smembers("processes").find { |id| id.include?(":#{@pid}:") }
    end

    def log
      File.exist?(log_path) ? File.read(log_path) : ""
    end

    def running?
      return false unless @pid

      Process.waitpid(@pid, Process::WNOHANG).nil?
    rescue Errno::ECHILD
      false
    end

    def stop(timeout: @shutdown_timeout + 5)
      return unless @pid

      signal("TERM")
      signal("KILL") unless wait_for_exit(timeout)
      wait_for_exit(5)
      @pid = nil
    end

    private

    def wait_until_registered(timeout)
      deadline = monotonic + timeout
      until identity
        raise "sidekiq exited while booting:\n#{log}" unless running?
        raise "sidekiq did not start within #{timeout}s:\n#{log}" if monotonic > deadline

        sleep 0.05
      end
    end

    def signal(name)
      Process.kill(name, -@pid)
    rescue Errno::ESRCH
      nil
    end

    def wait_for_exit(timeout)
      Timeout.timeout(timeout) { Process.waitpid(@pid) }
      true
    rescue Timeout::Error
      false
    rescue Errno::ECHILD
      true
    end

    def monotonic
      Ferrolock.monotonic
    end
  end
end
