# frozen_string_literal: true

# One side of bench/probes/ab_uncontended.rb: uncontended DistMutex lock+unlock, then ConcurrentLimiter(10)
# within_limit, on one thread, for SECONDS each, against the Redis at URL. Prints one JSON line per
# case: cycles/s, Redis commands per cycle (INFO commandstats), Redis CPU µs per cycle (INFO cpu),
# EVALSHA µs per cycle (commandstats usec), client CPU µs per cycle.
require "ferrolock"
require "json"
require "redis"

url, seconds, tag = ARGV
seconds = Float(seconds)
Ferrolock.configure do |c|
  c.redis_url = url
  c.connect_timeout = 10
  c.read_timeout = 10
end
stats = Redis.new(url: url)

def counters(stats)
  cs = stats.info("commandstats")
  cpu = stats.info("cpu")
  [cs.sum { |n, s| n == "info" ? 0 : s["calls"].to_i },
   cpu["used_cpu_sys"].to_f + cpu["used_cpu_user"].to_f,
   %w[evalsha eval].sum { |n| cs.dig(n, "usec").to_i }]
end

def run(stats, seconds, cycle)
  2000.times { cycle.call } # warm up: scripts loaded, connection made
  n = 0
  before = counters(stats)
  t0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  stop = started + seconds
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop
    50.times { cycle.call }
    n += 50
  end
  wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - t0
  after = counters(stats)
  { rate: n / wall, commands: (after[0] - before[0] - 1).fdiv(n), redis_us: 1e6 * (after[1] - before[1]) / n,
    script_us: (after[2] - before[2]).fdiv(n), client_us: 1e6 * cpu / n }
end

mutex = Ferrolock::DistMutex.new("ab:#{tag}:mutex")
limiter = Ferrolock::ConcurrentLimiter.new("ab:#{tag}:limiter", 10)
out = { mutex: run(stats, seconds, -> { mutex.synchronize { nil } }),
        limiter: run(stats, seconds, -> { limiter.within_limit { nil } }) }
puts JSON.dump(out)
