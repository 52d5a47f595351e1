# frozen_string_literal: true

require "redis"

module Bench
  # What one redis-server did during a measured run: every command it ran (INFO commandstats, which
  # counts the commands run inside scripts too), the commands clients sent (the slow log, with a 0 µs
  # threshold, logs both; those run inside a script carry the address "?:0"), and its CPU (INFO cpu,
  # used_cpu_sys + used_cpu_user). The slow log costs the server a little per command, the same for
  # every implementation. INFO and this object's own commands are not counted.
  class ServerStats
    NAME = "ferrolock-bench-stats"
    LOG_LENGTH = 5_000_000
    # Counts the log's entries server-side: {sent by clients, run inside scripts, log length}.
    COUNT = <<~LUA
      local sent, inside = 0, 0
      local log = redis.call('SLOWLOG', 'GET', -1)
      for _, e in ipairs(log) do
        if e[5] == '?:0' then
          inside = inside + 1
        elseif e[6] ~= ARGV[1] and string.lower(e[4][1]) ~= 'info' then
          sent = sent + 1
        end
      end
      return {sent, inside, #log}
    LUA

    Delta = Struct.new(:total, :sent, :cpu_seconds)

    def initialize(url)
      @redis = Redis.new(url: url)
      @redis.call("CLIENT", "SETNAME", NAME)
      @redis.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
      @redis.call("CONFIG", "SET", "slowlog-max-len", LOG_LENGTH.to_s)
    end

    # The block's run, measured.
    def around
      @redis.call("SLOWLOG", "RESET")
      before = counters
      yield
      after = counters
      sent, _inside, length = @redis.call("EVAL", COUNT, 0, NAME)
      raise "the slow log filled up (#{LOG_LENGTH} entries): client commands undercounted" if length >= LOG_LENGTH

      Delta.new(after[0] - before[0], sent, after[1] - before[1])
    end

    private

    def counters
      commands = @redis.info("commandstats").sum { |name, stat| name == "info" ? 0 : stat["calls"].to_i }
      cpu = @redis.info("cpu")
      [commands, cpu["used_cpu_sys"].to_f + cpu["used_cpu_user"].to_f]
    end
  end
end
