# frozen_string_literal: true

require "redis"

# One command per round trip: PING and SET, through Ferrolock::Client#call and
# through redis-rb (one Redis connection per thread, as a pool would give).
Bench.define("round_trip") do
  ours = Ferrolock::Client.new(url: Bench.redis_url)
  table = Bench::Table.new("command, threads")
  value = "x" * 32
  [1, 16].each do |threads|
    ops = threads == 1 ? 20_000 : 40_000
    ping_ours = Bench.ops_per_second(ops: ops, threads: threads) { ours.call("PING") }
    connect = -> { Redis.new(url: Bench.redis_url) }
    ping_rb = Bench.ops_per_second(ops: ops, threads: threads, setup: connect, &:ping)
    table.add("PING, #{threads}", ours: ping_ours, baseline: ping_rb)

    set_ours = Bench.ops_per_second(ops: ops, threads: threads) { ours.call("SET", "bench:key", value) }
    set_rb = Bench.ops_per_second(ops: ops, threads: threads, setup: connect) do |redis|
      redis.set("bench:key", value)
    end
    table.add("SET, #{threads}", ours: set_ours, baseline: set_rb)
  end
  table
end
