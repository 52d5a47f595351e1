# frozen_string_literal: true

require "redis"
require "sidekiq"
require "ferrolock/sidekiq/dual_lock_middleware"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

# DualLock and its Sidekiq server middleware:
# - jobs/s through a Sidekiq server middleware chain (10 threads, as a Sidekiq process would run
#   them) with and without DualLockMiddleware, for 1,000 duplicates of one key and 1,000 keys;
# - Redis commands per second sent by one waiting job while its duplicate runs, beside the
#   original sketch (SET NX on EXEC every 100 ms, keeping WAIT alive);
# - hand-off latency: from the executor's release to the waiter's start, beside that poller.
module DualLockBench
  JOBS = 1_000
  THREADS = 10
  HANDOFFS = 60

  # A job class that opted in; its body does nothing, so the table shows the lock's own cost.
  class NoopJob
    include ::Sidekiq::Worker
    sidekiq_options dual_lock: { max_wait: 30 }

    def perform(*); end
  end

  module_function

  def chain(with_middleware)
    ::Sidekiq::Middleware::Chain.new.tap do |chain|
      chain.add Ferrolock::Sidekiq::DualLockMiddleware if with_middleware
    end
  end

  # Jobs/s for JOBS payloads processed by THREADS threads through `chain`.
  def jobs_per_second(chain, distinct:)
    jobs = Queue.new
    JOBS.times { |i| jobs << { "class" => NoopJob.name, "args" => [distinct ? i : 0], "jid" => i.to_s } }
    THREADS.times { jobs << nil }
    started = Bench.monotonic
    Array.new(THREADS) do
      Thread.new do
        while (job = jobs.pop)
          worker = NoopJob.new
          chain.invoke(worker, job, "default") { worker.perform(*job["args"]) }
        end
      end
    end.each(&:join)
    JOBS / (Bench.monotonic - started)
  end

  def throughput
    table = Bench::Table.new("Sidekiq chain, #{JOBS} jobs, #{THREADS} threads",
                             ours: "with DualLockMiddleware", baseline: "without middleware")
    [["1,000 duplicates of one key", false], ["1,000 distinct keys", true]].each do |label, distinct|
      ours = Array.new(2) { jobs_per_second(chain(true), distinct: distinct) }.max
      baseline = Array.new(2) { jobs_per_second(chain(false), distinct: distinct) }.max
      table.add(label, ours: ours, baseline: baseline)
    end
    table
  end

  # Commands clients sent (commands run inside scripts are not counted).
  def client_commands(redis)
    redis.info("commandstats").sum { |_name, stats| stats["calls"].to_i }
  end

  # One duplicate runs for `hold` seconds while another waits; returns commands/s the waiter sent.
  def idle_rate(redis, hold: 3.0, &waiter)
    holding = Queue.new
    release = Queue.new
    holder = Thread.new { Ferrolock::DualLock.new("bench:idle").run { holding << true && release.pop } }
    holding.pop
    before = client_commands(redis)
    thread = Thread.new(&waiter)
    sleep hold
    # INFO itself counts once.
    sent = client_commands(redis) - before - 1
    release << true
    [holder, thread].each(&:join)
    sent / hold
  end

  # The original sketch's waiting loop: keep WAIT alive, retry EXEC with SET NX every 100 ms.
  def poll_until_exec(raw, key)
    loop do
      raw.pexpire("#{key}:wait", 60_000)
      return if raw.set("#{key}:exec", "token", nx: true, px: 60_000)

      sleep 0.1
    end
  end

  # The poller against a held EXEC, released by the bench when `stop` is pushed.
  def poller_idle_rate(redis, hold: 3.0)
    raw = Redis.new(url: Bench.redis_url)
    raw.set("poll:idle:exec", "holder", px: 60_000)
    raw.set("poll:idle:wait", "waiter", px: 60_000)
    before = client_commands(redis)
    thread = Thread.new { poll_until_exec(Redis.new(url: Bench.redis_url), "poll:idle") }
    sleep hold
    sent = client_commands(redis) - before - 1
    raw.del("poll:idle:exec")
    thread.join
    raw.del("poll:idle:exec", "poll:idle:wait")
    sent / hold
  end

  # Release -> waiter start, HANDOFFS times; the executor holds 20 ms each time.
  def handoffs(&round)
    Array.new(HANDOFFS) { round.call }.sort
  end

  def ours_handoff
    released = Queue.new
    started = Queue.new
    running = Queue.new
    holder = Thread.new do
      Ferrolock::DualLock.new("bench:handoff").run do
        running << true
        sleep 0.02
        released << Bench.monotonic
      end
    end
    running.pop
    waiter = Thread.new { Ferrolock::DualLock.new("bench:handoff").run { started << Bench.monotonic } }
    [holder, waiter].each(&:join)
    started.pop - released.pop
  end

  def poll_handoff(raw)
    raw.set("poll:handoff:exec", "holder", px: 60_000)
    waiter = Thread.new do
      poll_until_exec(Redis.new(url: Bench.redis_url), "poll:handoff")
      Bench.monotonic
    end
    sleep 0.02
    raw.del("poll:handoff:exec")
    released = Bench.monotonic
    result = waiter.value - released
    raw.del("poll:handoff:exec", "poll:handoff:wait")
    result
  end

  def percentile(sorted, pct)
    sorted[((sorted.size - 1) * pct).round]
  end

  def ms(seconds)
    format("%.2f ms", seconds * 1000)
  end

  def waiting_table
    stats = Redis.new(url: Bench.redis_url)
    ours_rate = idle_rate(stats) { Ferrolock::DualLock.new("bench:idle").run { nil } }
    poll_rate = poller_idle_rate(stats)
    ours = handoffs { ours_handoff }
    raw = Redis.new(url: Bench.redis_url)
    poll = handoffs { poll_handoff(raw) }
    [
      "| waiting duplicate | ferrolock DualLock | 100 ms polling (original sketch) |",
      "|---|---:|---:|",
      format("| Redis commands/s per waiting job | %.1f | %.1f |", ours_rate, poll_rate),
      "| release -> waiter starts, p50 | #{ms(percentile(ours, 0.5))} | #{ms(percentile(poll, 0.5))} |",
      "| release -> waiter starts, p99 | #{ms(percentile(ours, 0.99))} | #{ms(percentile(poll, 0.99))} |"
    ].join("\n")
  end
end

Bench.define("dual_lock") do
  Ferrolock.configure { |c| c.redis_url = Bench.redis_url }
  ::Sidekiq.logger.level = Logger::WARN
  Ferrolock.config.logger = Logger.new(nil)
  "#{DualLockBench.throughput}\n\n#{DualLockBench.waiting_table}"
end
