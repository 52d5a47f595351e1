# frozen_string_literal: true

require "redis"
require "fileutils"
require "securerandom"
require "sidekiq"
require "tmpdir"
require_relative "support/contention"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

# DualLock and its Sidekiq server middleware:
# - jobs/s of a real Sidekiq process (10 threads) draining 1,000 pushed jobs, with and without
#   DualLockMiddleware, for 1,000 duplicates of one key and 1,000 distinct keys;
# - Redis commands per second sent by one waiting job while its duplicate runs, beside the
#   original sketch (SET NX on EXEC every 100 ms, keeping WAIT alive);
# - hand-off latency: from the executor's release to the waiter's start, beside that poller;
# - contended: 8 workers in 2 processes and 32 in 4 on one key, empty runs, beside the sketch's
#   two-lock loop: runs/s, Redis commands and CPU per run, hand-off latency, fairness
#   (bench/support/contention.rb).
module DualLockBench
  JOBS = 1_000
  THREADS = 10
  HANDOFFS = 60
  OURS_COMMANDS = %w[evalsha eval blpop client|unblock client|id].freeze
  POLL_COMMANDS = %w[set pexpire].freeze
  # How long each contended run lasts (FERROLOCK_BENCH_SECONDS overrides).
  CONTENDED_SECONDS = Float(ENV.fetch("FERROLOCK_BENCH_SECONDS", "5"))
  # A skipped duplicate (another one already waits) triggers again after this pause, on both
  # sides: a steady stream of duplicates, rather than a busy loop that only measures skips.
  SKIP_PAUSE = 0.001

  # The Sidekiq app the bench runs (written to a temp file): a no-op job, so the numbers show
  # the lock's own cost, and an outermost middleware counting every finished job (ran or skipped).
  APP = <<~RUBY
    require "sidekiq"
    require "ferrolock"
    require "ferrolock/sidekiq/dual_lock/middleware"
    Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
    Ferrolock.config.logger = Logger.new(nil)

    class BenchDoneCounter
      def call(*)
        yield
      ensure
        Sidekiq.redis { |c| c.incr("bench:done") }
      end
    end

    Sidekiq.configure_server do |config|
      config.server_middleware do |chain|
        chain.add BenchDoneCounter
        chain.add Ferrolock::Sidekiq::DualLock::Middleware if ENV["WITH_DUAL_LOCK"] == "1"
      end
    end

    class NoopJob
      include Sidekiq::Worker
      sidekiq_options dual_lock: { max_wait: 30 }

      def perform(*); end
    end
  RUBY

  module_function

  # Starts `sidekiq` on the app, yields once it processes, stops it.
  def with_sidekiq(with_middleware)
    dir = Dir.mktmpdir("ferrolock-bench-")
    File.write(File.join(dir, "app.rb"), APP)
    log = File.join(dir, "sidekiq.log")
    env = { "REDIS_URL" => Bench.redis_url, "WITH_DUAL_LOCK" => with_middleware ? "1" : "0",
            "RUBYLIB" => File.expand_path("../lib", __dir__) }
    pid = Process.spawn(env, "sidekiq", "-r", File.join(dir, "app.rb"), "-c", THREADS.to_s, "-q", "bench",
                        out: log, err: %i[child out], pgroup: true)
    wait_for_heartbeat(pid, log)
    yield
  ensure
    Process.kill("TERM", -pid) if pid
    Process.wait(pid) if pid
    FileUtils.rm_rf(dir) if dir
  end

  # Sidekiq is ready once its first heartbeat registered it in the "processes" set.
  def wait_for_heartbeat(pid, log)
    redis = Redis.new(url: Bench.redis_url)
    deadline = Bench.monotonic + 30
    until redis.smembers("processes").any? { |id| id.include?(":#{pid}:") }
      exited = Process.waitpid(pid, Process::WNOHANG)
      raise "sidekiq did not start:\n#{File.read(log)}" if exited || Bench.monotonic > deadline

      sleep 0.05
    end
  end

  # Jobs/s: push JOBS jobs at once, time until every one has finished.
  def jobs_per_second(redis, distinct:)
    redis.del("bench:done")
    args = Array.new(JOBS) { |i| [distinct ? i : 0] }
    started = Bench.monotonic
    ::Sidekiq::Client.push_bulk("class" => "NoopJob", "queue" => "bench", "args" => args)
    sleep 0.002 until redis.get("bench:done").to_i >= JOBS
    JOBS / (Bench.monotonic - started)
  end

  def throughput
    ::Sidekiq.configure_client { |c| c.redis = { url: Bench.redis_url } }
    redis = Redis.new(url: Bench.redis_url)
    table = Bench::Table.new("Sidekiq process, #{THREADS} threads, #{JOBS} no-op jobs",
                             ours: "with DualLockMiddleware", baseline: "without middleware")
    results = [true, false].to_h do |with|
      runs = with_sidekiq(with) do
        # Warm-up, then best of two per case.
        jobs_per_second(redis, distinct: true)
        [false, true].to_h { |distinct| [distinct, Array.new(2) { jobs_per_second(redis, distinct: distinct) }.max] }
      end
      [with, runs]
    end
    table.add("1,000 duplicates of one key", ours: results[true][false], baseline: results[false][false])
    table.add("1,000 distinct keys", ours: results[true][true], baseline: results[false][true])
    table
  end

  # Commands clients sent of the given names (commands run inside scripts are not counted).
  def client_commands(redis, names)
    stats = redis.info("commandstats")
    names.sum { |name| stats.dig(name, "calls").to_i }
  end

  # One duplicate runs for `hold` seconds while another waits; returns commands/s the waiter sent.
  def idle_rate(redis, hold: 3.0, &waiter)
    holding = Queue.new
    release = Queue.new
    holder = Thread.new do
      Ferrolock::DualLock.new("bench:idle").run do
        holding << true
        release.pop
      end
    end
    holding.pop
    before = client_commands(redis, OURS_COMMANDS)
    thread = Thread.new(&waiter)
    sleep hold
    sent = client_commands(redis, OURS_COMMANDS) - before
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
    before = client_commands(redis, POLL_COMMANDS)
    thread = Thread.new { poll_until_exec(Redis.new(url: Bench.redis_url), "poll:idle") }
    sleep hold
    sent = client_commands(redis, POLL_COMMANDS) - before
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
      "| release -> waiter starts, p50 | #{ms(Bench.percentile(ours, 0.5))} | #{ms(Bench.percentile(poll, 0.5))} |",
      "| release -> waiter starts, p99 | #{ms(Bench.percentile(ours, 0.99))} | #{ms(Bench.percentile(poll, 0.99))} |"
    ].join("\n")
  end

  # Both implementations in each configuration, in one run on the same Redis. A "section" is
  # one duplicate that ran (its skipped attempts before it included in the cost).
  def contended
    measured = Bench::Contention::CONFIGS.flat_map do |config|
      [["ferrolock", config, ours_section], ["redis-rb two-lock loop, 100 ms retry", config, sketch_section]]
    end
    results = measured.map do |impl, (workers, processes), (setup, section)|
      [[impl, [workers, processes]],
       Bench::Contention.measure(workers: workers, processes: processes, seconds: CONTENDED_SECONDS,
                                 setup: setup, section: section)]
    end
    Bench::Contention.table("run", results)
  end

  def ours_section
    setup = -> { Ferrolock::DualLock.new("bench:contended") }
    [setup, lambda do |lock|
      entered = left = nil
      sleep SKIP_PAUSE until lock.run do
        entered = Bench.monotonic
        left = Bench.monotonic
      end
      [entered, left]
    end]
  end

  # The original sketch: SET NX on WAIT (taken: skip), then SET NX on EXEC every 100 ms keeping
  # WAIT alive, DEL WAIT, run, DEL EXEC.
  def sketch_section
    setup = -> { [Redis.new(url: Bench.redis_url), SecureRandom.hex(8)] }
    [setup, lambda do |(raw, token)|
      sleep SKIP_PAUSE until raw.set("bench:sketch:wait", token, nx: true, px: 60_000)
      poll_until_exec(raw, "bench:sketch")
      raw.del("bench:sketch:wait")
      entered = Bench.monotonic
      left = Bench.monotonic
      raw.del("bench:sketch:exec")
      [entered, left]
    end]
  end
end

Bench.define("dual_lock") do
  Ferrolock.configure { |c| c.redis_url = Bench.redis_url }
  "#{DualLockBench.throughput}\n\n#{DualLockBench.waiting_table}\n\n#{DualLockBench.contended}"
end
