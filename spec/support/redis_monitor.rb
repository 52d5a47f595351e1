# frozen_string_literal: true

require "redis"
require "securerandom"
require "timeout"

module FerrolockTest
  # MONITOR on a Redis for the length of a block, for examples that look at the commands their
  # code sent (rate_limiter_spec's script order, fair_tenant_spec's commands per job).
  class RedisMonitor
    # Yields a RedisMonitor watching the Redis at url; stops it after the block (also when MONITOR
    # never started).
    def self.watch(url)
      monitor = new(url)
      monitor.start
      yield monitor
    ensure
      monitor&.stop
    end

    def initialize(url)
      @url = url
      @lines = Queue.new
    end

    def start
      @thread = Thread.new { Redis.new(url: @url).monitor { |line| @lines << line } }
      Timeout.timeout(5) { @lines.pop } # "OK": monitoring from here on
    end

    # The lines seen since the last call, without waiting. (redis-rb 5's monitor also yields nil
    # when its read times out: not a line.)
    def lines_so_far
      seen = []
      seen << @lines.pop until @lines.empty?
      seen.compact
    end

    # Every line not read yet, up to now: a marker is ECHOed on another connection, and the lines
    # are read until it shows (so a command sent before this call is not missed).
    def lines_until_now
      marker = "monitor-end-#{SecureRandom.hex(4)}"
      echo = Redis.new(url: @url)
      echo.echo(marker)
      echo.close
      seen = []
      loop do
        line = Timeout.timeout(5) { @lines.pop }
        return seen if String(line).include?(marker)

        seen << line if line
      end
    end

    def stop
      @thread&.kill&.join(1)
    end
  end
end
