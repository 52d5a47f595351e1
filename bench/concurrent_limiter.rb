# frozen_string_literal: true

require "json"
require "securerandom"
require "redis"
require_relative "support/contention"
require_relative "support/raw_semaphore"

# ConcurrentLimiter beside a hand-rolled redis-rb semaphore (a sorted set of tokens scored by
# expiry: one Lua acquire that purges and counts, ZREM to release; no leases, no wake-ups):
# - a free slot: within_limit cycles/s and Redis round trips per cycle;
# - contended, limit 3, 8 threads in 2 processes: blocks/s and commands per block; the baseline
#   retries every 100 ms; and empty blocks with 8 workers / 2 processes and 32 / 4 for a fixed
#   time: blocks/s, Redis commands and CPU per block, fairness (bench/support/contention.rb);
# - hand-off: all slots held, one thread waiting, one holder leaves: how soon the waiter enters;
# - idle waiting: 4 threads wait while every slot is held 2 s: commands per waiting thread per s.
module LimiterBench
  LIMIT = 3
  THREADS_PER_PROCESS = 4
  BLOCKS_PER_THREAD = 50
  # Commands our clients send (ZREM is counted for the baseline only: scripts run it too).
  OURS = %w[evalsha eval blpop client|unblock client|id subscribe ping].freeze
  RAW = %w[evalsha eval zrem].freeze

  RawSemaphore = Bench::RawSemaphore

  # Hand-off: every slot is held and one thread waits; one holder leaves (t0) and the waiter
  # enters (t1). The holder that left becomes the next waiter only after that, so nobody barges.
  # `enter.call { ... }` runs a block in a slot; `await_waiter` returns once the waiter waits.
  class HandoffRig
    def initialize(enter)
      @ids = (0..LIMIT).to_a
      @start = @ids.map { Queue.new }
      @leave = @ids.map { Queue.new }
      @entered = Queue.new
      @threads = @ids.map { |id| Thread.new { run(id, enter) } }
    end

    # Sorted hand-off times in seconds.
    def measure(rounds, await_waiter)
      holders = @ids.take(LIMIT).each { |id| @start[id] << true }.map { @entered.pop.first }
      @start[LIMIT] << true
      gaps = Array.new(rounds) do
        await_waiter.call
        leaving = holders.shift
        released = LimiterBench.now
        @leave[leaving] << true
        id, at = @entered.pop
        holders << id
        @start[leaving] << true
        at - released
      end
      stop(holders)
      gaps.sort
    end

    private

    def run(id, enter)
      while @start[id].pop
        enter.call do
          @entered << [id, LimiterBench.now]
          @leave[id].pop
        end
      end
    end

    def stop(holders)
      @ids.each { |id| @start[id] << false }
      holders.each { |id| @leave[id] << true }
      @leave[@entered.pop.first] << true # the last waiter gets its slot
      @threads.each(&:join)
    end
  end

  module_function

  def now
    Bench.monotonic
  end

  # How long each fixed-time contended run lasts (FERROLOCK_BENCH_SECONDS overrides).
  CONTENDED_SECONDS = Float(ENV.fetch("FERROLOCK_BENCH_SECONDS", "5"))

  # Empty blocks, ours beside the 100 ms-retry baseline, in each configuration.
  def contended_fixed_time
    ours = [-> { Ferrolock::ConcurrentLimiter.new("bench:fixed", LIMIT, wait_timeout: 60) },
            ->(limiter) { limiter.within_limit { [now, now] } }]
    raw = [-> { RawSemaphore.new("bench:raw-fixed", LIMIT) }, ->(sem) { sem.within_limit { [now, now] } }]
    measured = Bench::Contention::CONFIGS.flat_map do |config|
      [["ferrolock", config, ours], ["redis-rb, 100 ms retry", config, raw]]
    end
    measured = measured.map do |impl, (workers, processes), (setup, section)|
      [[impl, [workers, processes]],
       Bench::Contention.measure(workers: workers, processes: processes, seconds: CONTENDED_SECONDS,
                                 setup: setup, section: section, slots: LIMIT)]
    end
    Bench::Contention.table("block", measured)
  end

  def stats
    @stats ||= Redis.new(url: Bench.redis_url)
  end

  def client_commands(names)
    Bench.commands_sent(stats, names)
  end

  def free_slot(table)
    limiter = Ferrolock::ConcurrentLimiter.new("bench:free", 10)
    raw = RawSemaphore.new("bench:raw-free", 10)
    results = Array.new(3) do
      [Bench.ops_per_second(ops: 5_000) { limiter.within_limit { nil } },
       Bench.ops_per_second(ops: 5_000) { raw.within_limit { nil } }]
    end
    table.add("free slot, 1 thread: within_limit cycles",
              ours: results.map(&:first).max, baseline: results.map(&:last).max)
    before = client_commands(OURS)
    200.times { limiter.within_limit { nil } }
    (client_commands(OURS) - before) / 200.0
  end

  def measure_contended(names, &block)
    before = client_commands(names)
    spans, wall = Bench.in_two_processes(threads: THREADS_PER_PROCESS, per_thread: BLOCKS_PER_THREAD, &block)
    sent = client_commands(names) - before
    { blocks: spans.size / wall, per_block: sent.fdiv(spans.size) }
  end

  def span
    entered = now
    sleep 0.002
    [entered, now]
  end

  # `waiters` threads wait while every slot is held for `hold` seconds.
  def idle_wait(names, hold: 2.0, waiters: 4, &enter)
    release = Queue.new
    holding = Queue.new
    holders = Array.new(LIMIT) do
      Thread.new do
        enter.call(hold + 3) do
          holding << true
          release.pop
        end
      end
    end
    LIMIT.times { holding.pop }
    before = client_commands(names)
    threads = Array.new(waiters) { Thread.new { enter.call(hold + 3) { nil } } }
    sleep hold
    sent = client_commands(names) - before
    LIMIT.times { release << true }
    (holders + threads).each(&:join)
    sent.fdiv(waiters * hold)
  end
end

Bench.define("concurrent_limiter") do
  table = Bench::Table.new("ConcurrentLimiter", baseline: "redis-rb sorted-set semaphore")
  round_trips = LimiterBench.free_slot(table)

  ours = LimiterBench.measure_contended(LimiterBench::OURS) do
    limiter = (Thread.current[:bench_limiter] ||= Ferrolock::ConcurrentLimiter.new("bench:busy", 3, wait_timeout: 60))
    limiter.within_limit { LimiterBench.span }
  end
  polling = LimiterBench.measure_contended(LimiterBench::RAW) do
    raw = (Thread.current[:bench_raw] ||= LimiterBench::RawSemaphore.new("bench:raw-busy", 3))
    raw.within_limit { LimiterBench.span }
  end
  table.add("limit 3, 8 threads / 2 processes: blocks", ours: ours[:blocks], baseline: polling[:blocks])

  handoff_limiter = Ferrolock::ConcurrentLimiter.new("bench:handoff", 3, wait_timeout: 60)
  ours[:handoffs] = LimiterBench::HandoffRig.new(->(&block) { handoff_limiter.within_limit(&block) }).measure(
    200,
    lambda do
      sleep 0.001 until handoff_limiter.status[:waiting] == 1
      sleep 0.01 # past the attempt, into BLPOP
    end
  )
  raw_enter = lambda do |&block|
    (Thread.current[:bench_raw] ||= LimiterBench::RawSemaphore.new("bench:raw-handoff", 3)).within_limit(&block)
  end
  polling[:handoffs] = LimiterBench::HandoffRig.new(raw_enter).measure(
    40,
    -> { sleep(0.02 + (rand * 0.1)) } # at a random point of the poller's 100 ms cycle
  )

  idle_ours = LimiterBench.idle_wait(LimiterBench::OURS) do |wait, &block|
    Ferrolock::ConcurrentLimiter.new("bench:idle", 3, wait_timeout: wait).within_limit(&block)
  end
  idle_poll = LimiterBench.idle_wait(LimiterBench::RAW) do |_wait, &block|
    LimiterBench::RawSemaphore.new("bench:raw-idle", 3).within_limit(&block)
  end

  lines = ["", "| ConcurrentLimiter (limit 3) | ferrolock | 100 ms polling |", "|---|---:|---:|"]
  lines << format("| free slot: Redis round trips per within_limit | %.2f | 2.00 |", round_trips)
  [["p50", 0.5], ["p99", 0.99]].each do |label, pct|
    lines << format("| slot hand-off to a waiting thread %s (ms) | %.3f | %.3f |", label,
                    1000 * Bench.percentile(ours[:handoffs], pct),
                    1000 * Bench.percentile(polling[:handoffs], pct))
  end
  lines << format("| contended: Redis commands per block | %.2f | %.2f |", ours[:per_block], polling[:per_block])
  lines << format("| all slots held 2 s: commands per waiting thread per second | %.2f | %.2f |",
                  idle_ours, idle_poll)
  "#{table}\n#{lines.join("\n")}\n\n#{LimiterBench.contended_fixed_time}"
end
