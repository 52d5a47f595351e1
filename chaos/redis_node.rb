# frozen_string_literal: true

require "fileutils"
require_relative "../demo/throwaway_redis"

module Chaos
  # The run's one throwaway redis-server, with AOF and appendfsync always (so a kill -9 loses
  # nothing acknowledged), and the controls the fault injector needs. Never a system Redis.
  class RedisNode < Demo::ThrowawayRedis
    def initialize
      super(extra_args: ["--appendonly", "yes", "--appendfsync", "always"], prefix: "ferrolock-chaos-")
    end

    # kill -9, then start again on the same port. wipe: true deletes the AOF first, as a restart
    # of a server without persistence would (every key is gone).
    def restart(wipe:)
      kill9
      FileUtils.rm_rf(Dir.glob(File.join(dir, "{appendonlydir,dump.rdb}"))) if wipe
      start
    end

    # kill -9 and nothing else: #start brings it back from its AOF.
    def crash
      kill9
    end

    def pause
      Process.kill("STOP", @pid)
    end

    def resume
      Process.kill("CONT", @pid)
    end

    # Runs an admin command from a separate redis-cli connection.
    def admin(*args)
      system("redis-cli", "-p", port.to_s, *args, out: File::NULL, err: File::NULL)
    end

    def stop
      return unless @pid

      resume
      kill9
    ensure
      FileUtils.rm_rf(dir)
    end

    private

    def kill9
      Process.kill("KILL", @pid)
      Process.wait(@pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    ensure
      @pid = nil
    end
  end
end
