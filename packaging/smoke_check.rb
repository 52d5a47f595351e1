# frozen_string_literal: true

# Run by the user's Ruby on the installed gem (bin/check-precompiled-gem), against the Redis at ARGV[0]:
# each primitive once, for real, counting what happened. Prints one line per check; aborts on the first
# that fails. Short on purpose: under qemu emulation Ruby runs about 13 times slower.
require "ferrolock"
require "logger"
require "active_job"

installed = Gem.loaded_specs.fetch("ferrolock").full_gem_path
abort "smoke: ferrolock loaded from #{installed}, not GEM_HOME" unless installed.start_with?(ENV.fetch("GEM_HOME"))
Ferrolock.configure { |c| c.redis_url = ARGV.fetch(0) }
Ferrolock.config.logger = Logger.new(nil)
ActiveJob::Base.logger = Logger.new(nil)
redis = Ferrolock::Client.new(url: ARGV.fetch(0))

def check(what, ok, detail)
  abort "smoke: #{what}: FAIL: #{detail}" unless ok
  puts "smoke: #{what}: #{detail}"
end

# DistMutex: 4 threads increment a counter kept in a Ruby variable with a yield in between, 10 times each;
# without mutual exclusion increments are lost.
mutex = Ferrolock::DistMutex.new("smoke-mutex")
count = 0
increment = lambda do
  seen = count
  Thread.pass
  count = seen + 1
end
Array.new(4) { Thread.new { 10.times { mutex.synchronize(wait_timeout: 60, &increment) } } }.each(&:join)
check("DistMutex", count == 40, "4 threads x 10 increments under the lock: #{count}")

# ConcurrentLimiter: 6 threads through a limit of 2 hold their slot for a moment: never more than 2 inside.
limiter = Ferrolock::ConcurrentLimiter.new("smoke-limiter", 2, wait_timeout: 60, lease: 30)
inside = 0
most = 0
ran = 0
lock = Mutex.new
Array.new(6) do
  Thread.new do
    limiter.within_limit do
      lock.synchronize do
        inside += 1
        most = [most, inside].max
      end
      sleep 0.2
      lock.synchronize do
        inside -= 1
        ran += 1
      end
    end
  end
end.each(&:join)
status = limiter.status
check("ConcurrentLimiter", ran == 6 && most == 2 && status[:in_use].zero?,
      "6 blocks through a limit of 2: #{ran} ran, at most #{most} at once; then #{status}")

# RateLimiter: 3 calls a minute; the 4th is over the limit and says when to retry.
rate = Ferrolock::RateLimiter.window("smoke-rate", 3, :minute, wait_timeout: 0)
calls = Array.new(3) { |n| rate.within_limit { n } }
begin
  rate.within_limit { :fourth }
  check("RateLimiter", false, "a 4th call within the minute ran")
rescue Ferrolock::OverLimit => e
  check("RateLimiter", calls == [0, 1, 2] && e.retry_after.positive?,
        "3 calls a minute: #{calls.size} ran, the 4th over the limit (retry after #{e.retry_after.round(1)} s)")
end

# ActiveJob limits_concurrency, on the :test adapter as a worker would run it: of 3 jobs with one key and
# a limit of 1, the adapter gets one; the others wait in Redis and are enqueued one by one as slots free.
ActiveJob::Base.include(Ferrolock::ActiveJob::Concurrency)
RAN = [] # rubocop:disable Style/MutableConstant -- filled by the jobs
# One account's jobs, one at a time.
class SmokeLimitedJob < ActiveJob::Base
  self.queue_adapter = :test
  limits_concurrency to: 1, key: ->(account, _n) { account }, duration: 60

  def perform(account, number) = RAN << [account, number]
end
3.times { |n| SmokeLimitedJob.perform_later("a", n) }
queue = SmokeLimitedJob.queue_adapter.enqueued_jobs
queued = queue.size
blocked = redis.call("LLEN", "ferrolock:{concurrency:SmokeLimitedJob/a}:blocked")
ActiveJob::Base.execute(queue.shift.transform_keys(&:to_s)) until queue.empty?
check("ActiveJob limits_concurrency", queued == 1 && blocked == 2 && RAN == [["a", 0], ["a", 1], ["a", 2]],
      "3 jobs, limit 1: #{queued} enqueued, #{blocked} blocked in Redis, then ran #{RAN.map(&:last)}")
Ferrolock::ActiveJob::Slots.reset!
