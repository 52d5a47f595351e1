# frozen_string_literal: true

require "json"
require "redis"
require_relative "support/contention"

# DistMutex against what the seeds did by hand:
# - uncontended lock+unlock beside raw SET NX PX + DEL (which releases unsafely);
# - contended: 8 workers in 2 processes and 32 in 4 on one name, empty sections, beside a loop
#   that retries SET NX every 100 ms: sections/s, Redis commands and CPU per section, hand-off
#   latency, fairness (bench/support/contention.rb);
# - idle waiting: threads waiting while the lock is held 2 s: commands per waiting thread per s.
module DistMutexBench
  ROUNDS = 3
  # How long each contended run lasts (FERROLOCK_BENCH_SECONDS overrides).
  CONTENDED_SECONDS = Float(ENV.fetch("FERROLOCK_BENCH_SECONDS", "5"))

  module_function

  # Best of ROUNDS alternating runs, so neither side pays for a burst of load alone.
  def best_of(ours, baseline)
    results = Array.new(ROUNDS) { [ours.call, baseline.call] }
    [results.map(&:first).max, results.map(&:last).max]
  end

  def uncontended(table)
    m = Ferrolock::DistMutex.new("bench:uncontended")
    raw = Redis.new(url: Bench.redis_url)
    ours, baseline = best_of(
      -> { Bench.ops_per_second(ops: 10_000) { m.synchronize { nil } } },
      lambda do
        Bench.ops_per_second(ops: 10_000) do
          raw.set("bench:raw", "token", nx: true, px: 30_000)
          raw.del("bench:raw")
        end
      end
    )
    table.add("uncontended lock+unlock, 1 thread", ours: ours, baseline: baseline)
  end

  def client_commands(redis, names)
    Bench.commands_sent(redis, names)
  end

  # Every implementation in each configuration, in one run on the same Redis: ferrolock as
  # configured (cohort hand-off, 8 local passes), with every hand-off through Redis, and unfair.
  def contended
    results = Bench::Contention::CONFIGS.flat_map do |config|
      [["ferrolock", config, ours_section], ["ferrolock, local_passes: 0", config, ours_section(local_passes: 0)],
       ["ferrolock, fair: false", config, ours_section(fair: false)],
       ["redis-rb, 100 ms retry", config, polling_section]]
    end
    measured = results.map do |impl, (workers, processes), (setup, section)|
      [[impl, [workers, processes]],
       Bench::Contention.measure(workers: workers, processes: processes, seconds: CONTENDED_SECONDS,
                                 setup: setup, section: section)]
    end
    Bench::Contention.table("section", measured)
  end

  def ours_section(local_passes: Ferrolock::DistMutex::LOCAL_PASSES, fair: true)
    setup = -> { Ferrolock::DistMutex.new("bench:contended", local_passes: local_passes, fair: fair) }
    [setup, lambda do |m|
      m.lock
      entered = now
      left = now
      m.unlock
      [entered, left]
    end]
  end

  def polling_section
    setup = -> { Redis.new(url: Bench.redis_url) }
    [setup, lambda do |raw|
      sleep 0.1 until raw.set("bench:polling", "x", nx: true, px: 30_000)
      entered = now
      left = now
      raw.del("bench:polling")
      [entered, left]
    end]
  end

  # Four threads wait while another holds the lock for `hold` seconds.
  def measure_idle_wait(redis, names, hold: 2.0, waiters: 4, &wait_once)
    holding = Queue.new
    release = Queue.new
    holder = Thread.new { wait_once.call(holding, release) }
    holding.pop
    before = client_commands(redis, names)
    threads = Array.new(waiters) { Thread.new { wait_once.call(nil, nil) } }
    sleep hold
    sent = client_commands(redis, names) - before
    release << true
    holder.join
    threads.each(&:join)
    sent.fdiv(waiters * hold)
  end

  def now
    Bench.monotonic
  end
end

Bench.define("dist_mutex") do
  table = Bench::Table.new("DistMutex", baseline: "redis-rb SET NX PX + DEL")
  DistMutexBench.uncontended(table)
  stats = Redis.new(url: Bench.redis_url)
  ours_names = %w[evalsha eval blpop client|unblock client|id subscribe ping]
  poll_names = %w[set del]

  contended = DistMutexBench.contended
  poll_lock = ->(raw, key) { sleep 0.1 until raw.set(key, "x", nx: true, px: 30_000) }
  idle_ours = DistMutexBench.measure_idle_wait(stats, ours_names) do |holding, release|
    m = Ferrolock::DistMutex.new("bench:idle")
    m.synchronize do
      holding&.push(true)
      release&.pop
    end
  end
  idle_poll = DistMutexBench.measure_idle_wait(stats, poll_names) do |holding, release|
    raw = Redis.new(url: Bench.redis_url)
    poll_lock.call(raw, "bench:idle-poll")
    holding&.push(true)
    release&.pop
    raw.del("bench:idle-poll")
  end

  latency = ["", "| DistMutex waiting | ferrolock | 100 ms polling |", "|---|---:|---:|"]
  latency << format("| lock held 2 s: commands per waiting thread per second (4 threads, one process) | %.2f | %.2f |",
                    idle_ours, idle_poll)
  "#{table}\n#{latency.join("\n")}\n\n#{contended}"
end
