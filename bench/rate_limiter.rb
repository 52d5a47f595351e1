# frozen_string_literal: true

require "redis"

# RateLimiter beside redis-rb running the same algorithm: the very Lua file ferrolock runs
# (ext/ferrolock-core/lua/rate_limiter/), sent with EVALSHA by redis-rb, one connection per
# thread, so the difference is the client (Rust core, GVL released) and not the algorithm.
# Limits are set high enough that every call is granted: this measures the cost of a call.
# Then saturated rows: 8 threads against 200 calls/s, calls/s achieved over 3 s after a second
# of warm-up, where the baseline sends the same wait (5 s) and sleeps until the slot the script
# reserved, as ours does.
module RateLimiterBench
  LUA_DIR = File.expand_path("../ext/ferrolock-core/lua/rate_limiter", __dir__)
  # Calls per second no run comes near (bucket and leaky allow at most one per microsecond).
  HUGE = 1_000_000
  SATURATED_RATE = 200
  SATURATED_SECONDS = 3

  WAIT_US = 5_000_000

  # name => [ours, script file, ARGV before the wait and id] with `count` calls per `interval`
  # seconds. The points row spends 3 of `count` points a call (a third of the calls).
  def self.kinds(count, interval)
    us = interval * 1e6
    emission = us / count
    {
      "window" => [->(n) { Ferrolock::RateLimiter.window(n, count, interval) }, "window", [count, us]],
      "sliding window" => [->(n) { Ferrolock::RateLimiter.window(n, count, interval, sliding: true) },
                           "sliding_window", [count, us]],
      "bucket" => [->(n) { Ferrolock::RateLimiter.bucket(n, count, interval) }, "gcra",
                   [emission, emission * (count - 1), 1]],
      "leaky" => [->(n) { Ferrolock::RateLimiter.leaky(n, count, interval) }, "gcra", [emission, 0, 1]],
      "leaky, burst 1" => [->(n) { Ferrolock::RateLimiter.leaky(n, count, interval, burst: 1) }, "gcra",
                           [emission, emission, 1]],
      "points, cost 3" => [->(n) { Points.new(Ferrolock::RateLimiter.points(n, count, interval)) }, "gcra",
                           [emission, emission * (count - 1), 3]]
    }
  end

  # Our points limiter, spending 3 points a call.
  Points = Struct.new(:limiter) do
    def within_limit(&block)
      limiter.within_limit(3, &block)
    end
  end

  # The hand-written client: EVALSHA of the script with the same wait, then a sleep until the
  # slot it reserved (or, refused, until the next slot and again).
  class Raw
    def initialize(file, key, argv)
      @redis = Redis.new(url: Bench.redis_url)
      @sha = @redis.script(:load, File.read(File.join(LUA_DIR, "#{file}.lua")))
      @key = key
      @argv = argv
      @ids = 0
    end

    def within_limit
      loop do
        id = "#{object_id}-#{@ids += 1}"
        granted, *rest = @redis.evalsha(@sha, keys: [@key], argv: @argv + [WAIT_US, id])
        wait_us = granted == 1 ? rest[2] : rest[0]
        sleep wait_us / 1e6 if wait_us.positive?
        break if granted == 1
      end
      yield
    end
  end

  module_function

  def throughput(table, threads)
    kinds(HUGE, 1).each do |label, (make, file, argv)|
      limiter = make.call("bench:rl:#{label}:#{threads}")
      ours = Bench.ops_per_second(ops: 5_000, threads: threads) { limiter.within_limit { nil } }
      raw = Bench.ops_per_second(ops: 5_000, threads: threads,
                                 setup: -> { Raw.new(file, "bench:raw:#{label}:#{threads}", argv) }) do |r|
        r.within_limit { nil }
      end
      table.add("#{label}, #{threads} thread#{"s" if threads > 1}: calls", ours: ours, baseline: raw)
    end
  end

  # Calls/s achieved by 8 threads against SATURATED_RATE per second, counted after a first
  # second of warm-up (which a window, a bucket and a burst spend on their initial allowance).
  def saturated(enter)
    start = Bench.monotonic + 1
    stop = start + SATURATED_SECONDS
    calls = Array.new(8) do |t|
      Thread.new do
        n = 0
        enter.call(t) { n += 1 if Bench.monotonic >= start } while Bench.monotonic < stop
        n
      end
    end.sum(&:value)
    calls.fdiv(SATURATED_SECONDS)
  end

  def saturated_rows
    lines = ["", "| 8 threads, limit #{SATURATED_RATE} calls/s, #{SATURATED_SECONDS} s | ferrolock | redis-rb |",
             "|---|---:|---:|"]
    kinds(SATURATED_RATE, 1).each do |label, (make, file, argv)|
      limiter = make.call("bench:rl-sat:#{label}")
      raws = Array.new(8) { Raw.new(file, "bench:raw-sat:#{label}", argv) }
      ours = saturated(->(_t, &b) { limiter.within_limit(&b) })
      raw = saturated(->(t, &b) { raws[t].within_limit(&b) })
      lines << format("| %s: calls/s achieved | %.1f | %.1f |", label, ours, raw)
    end
    lines.join("\n")
  end
end

Bench.define("rate_limiter") do
  table = Bench::Table.new("RateLimiter (every call granted)", baseline: "redis-rb EVALSHA, same Lua")
  RateLimiterBench.throughput(table, 1)
  RateLimiterBench.throughput(table, 8)
  "#{table}\n#{RateLimiterBench.saturated_rows}"
end
