# frozen_string_literal: true

require "rbconfig"
require_relative "processes"

module FerrolockTest
  # spec/support/web_fixture.rb in a child process (locks held by another process, as in
  # production); `stop` closes its stdin and waits.
  class WebFixtureProcess
    SCRIPT = File.join(__dir__, "web_fixture.rb")

    def start(timeout: 30)
      env = { "REDIS_URL" => FerrolockTest.redis_server.url, "RUBYLIB" => SidekiqVersion.rubylib(LIB) }
      @stdin, @stdout, @wait = Open3.popen2(env, RbConfig.ruby, "-I", LIB, SCRIPT, pgroup: true)
      ready = @stdout.wait_readable(timeout) && @stdout.gets
      raise "web fixture did not get ready within #{timeout} s" unless ready == "ready\n"

      self
    end

    def pid
      @wait.pid
    end

    def stop
      return unless @wait

      @stdin.close unless @stdin.closed?
      Process.kill("KILL", -@wait.pid) unless @wait.join(10)
      @wait.join
      @wait = nil
    end
  end
end
