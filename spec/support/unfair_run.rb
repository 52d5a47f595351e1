# frozen_string_literal: true

require "redis"

module FerrolockTest
  # The two-process workload of the fair: false specs (dist_mutex_unfair_spec.rb,
  # concurrent_limiter_unfair_spec.rb): each includes this and defines `worker(client, process,
  # fair)`, one thread's holds until the key "stop" exists, which calls `log_entry` inside each
  # hold; the run returns the log, in the order the holds began.
  module UnfairRun
    # Counts the holders inside ("inside", highest in "max") and logs ARGV joined by "|".
    ENTER = <<~LUA
      local n = redis.call('INCR', KEYS[1])
      if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
      redis.call('RPUSH', KEYS[3], table.concat(ARGV, '|'))
      return n
    LUA

    def log_entry(raw, *fields)
      raw.eval(ENTER, keys: %w[inside max log], argv: fields)
    end

    # Redis' clock in ms: waits are measured with it, not with the clients' clocks.
    def redis_ms(raw)
      seconds, micros = raw.time
      (seconds * 1000) + (micros / 1000.0)
    end

    # The bound's margin for queueing and noise: the longest wait (s) in the logs of the same load run
    # fairly, one before the unfair run and one after it (the machine's load may change between runs).
    def longest_fair_wait(*fair_logs)
      fair_logs.map { |log| log.map(&:last).max / 1000.0 }.max
    end

    # processes x threads run for `seconds` under `namespace`; the log, each entry's fields as Floats.
    def run_processes(fair:, namespace:, threads:, processes: 2, seconds: 1.5, also_clear: [])
      redis.del("stop", "inside", "max", "log", "done", *also_clear)
      pids = Array.new(processes) do |p|
        fork_child do
          client = Ferrolock::Client.new(url: server.url, namespace: namespace)
          counts = Array.new(threads) { Thread.new { worker(client, p, fair) } }.map(&:value)
          Redis.new(url: server.url).incrby("done", counts.sum)
        end
      end
      sleep seconds
      redis.set("stop", "1")
      expect_children_succeed(pids, timeout: 60)
      redis.lrange("log", 0, -1).map { |line| line.split("|").map { |f| Float(f) } }
    end
  end
end
