# frozen_string_literal: true

# Where a contended block's client time goes: 8 workers / 2 processes, pinned as bin/bench peers
# (redis-servers on the first CPU, clients on the others), each block INCR + DECR on a second Redis.
# Prints blocks/s, client CPU µs per block (user, sys), Redis commands and CPU per block.
#   ruby -Ilib bench/probes/limiter_io.rb MODE SECONDS   (MODE: limiter, mutex, ceiling)
# Env: W workers (8), P processes (2), FAIR=0 for fair: false, PASSES for local_passes (the default),
# SECTION=empty for blocks without the INCR + DECR.
require "ferrolock"
require "redis"
require_relative "../harness"
require_relative "../support/pinning"

mode = (ARGV[0] || "limiter").to_sym
seconds = Float(ARGV[1] || 5)
workers = Integer(ENV.fetch("W", 8))
procs = Integer(ENV.fetch("P", 2))
options = { fair: ENV.fetch("FAIR", "1") != "0" }
options[:local_passes] = Integer(ENV["PASSES"]) if ENV["PASSES"]

lock_redis = ENV["LOCK_URL"] || Demo::ThrowawayRedis.new.start.url
io_redis = ENV["IO_URL"] || Demo::ThrowawayRedis.new.start.url
Ferrolock.configure { |c| c.redis_url = lock_redis }
pin = Bench::Pinning.start
Bench::Pinning.server(lock_redis)
Bench::Pinning.server(io_redis)

stats = Redis.new(url: lock_redis)
counters = lambda do
  cmd = stats.info("commandstats").sum { |n, s| n == "info" ? 0 : s["calls"].to_i }
  cpu = stats.info("cpu")
  [cmd, cpu["used_cpu_sys"].to_f + cpu["used_cpu_user"].to_f]
end
key = "lio:#{mode}:#{Process.pid}"
start_at = Bench.monotonic + 1.0
stop_at = start_at + seconds
before = counters.call
pids = []
readers = Array.new(procs) do |_p|
  r, w = IO.pipe
  pids << fork do
    r.close
    threads = Array.new(workers / procs) do
      Thread.new do
        io = Redis.new(url: io_redis)
        lock = case mode
               when :limiter then Ferrolock::ConcurrentLimiter.new(key, 3, wait_timeout: 60, lease: 10, **options)
               when :mutex then Ferrolock::DistMutex.new(key, lease: 10, **options)
               end
        io.ping
        n = 0
        sleep 0.001 while Bench.monotonic < start_at
        section = ENV["SECTION"] == "empty" ? -> {} : -> { io.incr(key) && io.decr(key) }
        while Bench.monotonic < stop_at
          case mode
          when :limiter then lock.within_limit(&section)
          when :mutex then lock.synchronize(&section)
          else section.call
          end
          n += 1
        end
        n
      end
    end
    sleep 0.001 while Bench.monotonic < start_at
    t0 = Process.times
    count = threads.sum(&:value)
    t1 = Process.times
    w.write(Marshal.dump([count, t1.utime - t0.utime, t1.stime - t0.stime]))
    exit!(0)
  end
  w.close
  r
end
results = readers.map { |r| Marshal.load(r.read) } # rubocop:disable Security/MarshalLoad -- our own forked children
pids.each { |pid| Process.wait(pid) }
after = counters.call
n = results.sum(&:first)
u = results.sum { |x| x[1] }
s = results.sum { |x| x[2] }
puts format("%-8s %s: %.0f blocks/s; client CPU/block %.1f µs (user %.1f, sys %.1f); " \
            "Redis cmds/block %.2f, Redis CPU/block %.1f µs", mode, pin.split(":").first, n / seconds,
            1e6 * (u + s) / n, 1e6 * u / n, 1e6 * s / n,
            (after[0] - before[0]).fdiv(n), 1e6 * (after[1] - before[1]) / n)
