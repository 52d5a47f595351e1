# frozen_string_literal: true

require "redis"
require_relative "support/raw_semaphore"

# bin/bench guard: a quick (about 30 s) look at the uncontended speed, printed by every bin/test
# run so that a regression shows in the CI log (it never fails on the numbers):
# - DistMutex lock+unlock beside raw redis-rb SET NX PX + DEL;
# - ConcurrentLimiter#within_limit on a free slot beside a raw two-command semaphore cycle;
# - Redis commands per cycle (INFO commandstats, counting those run inside scripts), the round
#   trips among them, and the time Redis spent running them (scripts included: on one machine
#   each is a share of the cycle that no client-side work can win back).
# Best of ROUNDS alternating runs, all on one throwaway Redis.
module GuardBench
  ROUNDS = 3
  OPS = 20_000
  # Commands each case's client sends itself (the others in commandstats ran inside scripts).
  SENT = { mutex: %w[evalsha eval], raw_lock: %w[set del], limiter: %w[evalsha eval],
           raw_limiter: %w[evalsha zrem] }.freeze

  module_function

  def best(cases)
    results = Array.new(ROUNDS) { cases.transform_values { |op| Bench.ops_per_second(ops: OPS, &op) } }
    cases.keys.to_h { |name| [name, results.map { |r| r[name] }.max] }
  end

  # [commands, round trips, Redis µs] per cycle of the block. EVALSHA's time includes the
  # commands its script runs (counted again under their own names): only client-sent names'
  # time is summed.
  def commands_per_cycle(stats, sent, cycles: 500, &cycle)
    before = stats.info("commandstats")
    cycles.times(&cycle)
    after = stats.info("commandstats")
    sum = ->(info, names, field) { names.sum { |name| info.dig(name, field).to_i } }
    # The first INFO is counted in the second one's stats.
    all = sum.call(after, after.keys, "calls") - sum.call(before, before.keys, "calls") - 1
    trips = sum.call(after, sent, "calls") - sum.call(before, sent, "calls")
    usec = sum.call(after, sent, "usec") - sum.call(before, sent, "usec")
    [all.fdiv(cycles), trips.fdiv(cycles), usec.fdiv(cycles)]
  end
end

Bench.define("guard") do
  mutex = Ferrolock::DistMutex.new("bench:guard")
  limiter = Ferrolock::ConcurrentLimiter.new("bench:guard-limiter", 10)
  raw = Redis.new(url: Bench.redis_url)
  semaphore = Bench::RawSemaphore.new("bench:guard-raw-limiter", 10)
  # Procs: the harness passes them an argument they ignore.
  cases = {
    mutex: proc { mutex.synchronize { nil } },
    raw_lock: proc do
      raw.set("bench:guard-raw", "token", nx: true, px: 30_000)
      raw.del("bench:guard-raw")
    end,
    limiter: proc { limiter.within_limit { nil } },
    raw_limiter: proc { semaphore.within_limit { nil } }
  }
  best = GuardBench.best(cases)
  stats = Redis.new(url: Bench.redis_url)
  counts = cases.to_h { |name, op| [name, GuardBench.commands_per_cycle(stats, GuardBench::SENT.fetch(name), &op)] }

  lines = ["| uncontended, 1 thread (best of #{GuardBench::ROUNDS}) | ferrolock cycles/s | raw redis-rb cycles/s | " \
           "ratio | ferrolock commands (round trips), Redis µs per cycle | raw commands (round trips), Redis µs |",
           "|---|---:|---:|---:|---:|---:|"]
  [["DistMutex lock+unlock vs SET NX PX + DEL", :mutex, :raw_lock],
   ["ConcurrentLimiter within_limit vs sorted-set semaphore", :limiter, :raw_limiter]].each do |label, ours, theirs|
    lines << format("| %s | %s | %s | %.2fx | %.1f (%.1f), %.1f | %.1f (%.1f), %.1f |", label, Bench.number(best[ours]),
                    Bench.number(best[theirs]), best[ours] / best[theirs], *counts[ours], *counts[theirs])
  end
  lines.join("\n")
end
