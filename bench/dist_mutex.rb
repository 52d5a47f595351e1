# frozen_string_literal: true

require "json"
require "redis"

# DistMutex against what the seeds did by hand:
# - uncontended lock+unlock beside raw SET NX PX + DEL (which releases unsafely);
# - contended: 8 threads in 2 processes on one name, beside a loop that retries SET NX every
#   100 ms: critical sections/s, hand-off latency (release -> next holder), commands per section;
# - idle waiting: threads waiting while the lock is held 2 s: commands per waiting thread per s.
module DistMutexBench
  SECTIONS_PER_THREAD = 60
  THREADS_PER_PROCESS = 4
  ROUNDS = 3

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

  # Release -> next acquisition, between consecutive sections (sorted by acquisition).
  def handoffs(spans)
    spans.each_cons(2).map { |(_, released), (acquired, _)| acquired - released }.sort
  end

  def client_commands(redis, names)
    Bench.commands_sent(redis, names)
  end

  def measure_contended(redis, names, &section)
    before = client_commands(redis, names)
    spans, wall = Bench.in_two_processes(threads: THREADS_PER_PROCESS, per_thread: SECTIONS_PER_THREAD, &section)
    spans = spans.sort_by(&:first)
    sent = client_commands(redis, names) - before
    { sections: spans.size / wall, handoffs: handoffs(spans), per_section: sent.fdiv(spans.size) }
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
  ours_names = %w[evalsha eval blpop client|unblock client|id]
  poll_names = %w[set del]

  ours = DistMutexBench.measure_contended(stats, ours_names) do
    m = (Thread.current[:bench_mutex] ||= Ferrolock::DistMutex.new("bench:contended"))
    m.lock
    acquired = DistMutexBench.now
    sleep 0.001
    released = DistMutexBench.now
    m.unlock
    [acquired, released]
  end
  poll_lock = lambda do |raw, key|
    sleep 0.1 until raw.set(key, "x", nx: true, px: 30_000)
  end
  polling = DistMutexBench.measure_contended(stats, poll_names) do
    raw = (Thread.current[:bench_redis] ||= Redis.new(url: Bench.redis_url))
    poll_lock.call(raw, "bench:polling")
    acquired = DistMutexBench.now
    sleep 0.001
    released = DistMutexBench.now
    raw.del("bench:polling")
    [acquired, released]
  end
  table.add("contended, 8 threads / 2 processes: sections", ours: ours[:sections], baseline: polling[:sections])

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
  [["p50", 0.5], ["p99", 0.99]].each do |label, pct|
    latency << format("| contended hand-off %s (ms) | %.3f | %.3f |", label,
                      1000 * Bench.percentile(ours[:handoffs], pct),
                      1000 * Bench.percentile(polling[:handoffs], pct))
  end
  latency << format("| contended: Redis commands per critical section | %.2f | %.2f |",
                    ours[:per_section], polling[:per_section])
  latency << format("| lock held 2 s: commands per waiting thread per second | %.2f | %.2f |", idle_ours, idle_poll)
  "#{table}\n#{latency.join("\n")}"
end
