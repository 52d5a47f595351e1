# frozen_string_literal: true

# Per-command Redis time (INFO commandstats usec_per_call) of uncontended DistMutex and limiter cycles.
require "ferrolock"
require "redis"
require_relative "../harness"
require_relative "../support/pinning"
r = Demo::ThrowawayRedis.new.start
Bench::Pinning.start
Bench::Pinning.server(r.url)
Ferrolock.configure do |c|
  c.redis_url = r.url
  c.read_timeout = 10
end
stats = Redis.new(url: r.url)
{ "DistMutex" => lambda {
  m = Ferrolock::DistMutex.new("cc:m")
  -> { m.synchronize { nil } }
},
  "ConcurrentLimiter(10)" => lambda {
                               l = Ferrolock::ConcurrentLimiter.new("cc:l", 10)
                               lambda {
                                 l.within_limit do
                                   nil
                                 end
                               }
                             } }.each do |name, make|
  op = make.call
  2000.times { op.call }
  stats.call("CONFIG", "RESETSTAT")
  n = 20_000
  n.times { op.call }
  cs = stats.info("commandstats").except("info", "config").sort_by { |_, s| -s["calls"].to_i }
  costs = cs.map { |k, s| format("%s %.2f x %.2f µs", k, s["calls"].to_f / n, s["usec_per_call"].to_f) }
  puts "#{name}: #{costs.join("; ")}"
end
