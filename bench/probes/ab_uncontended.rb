# frozen_string_literal: true

# Pinned A/B of the uncontended DistMutex and limiter cycles: redis-server on the first CPU, the
# clients on the others; the versions' children (bench/probes/ab_child.rb, each loading its own lib/)
# alternate on one Redis, ROUNDS rounds.
#   ruby bench/probes/ab_uncontended.rb SECONDS ROUNDS name=/path/to/lib name=/path/to/lib ...
require "json"
require "redis"
require_relative "../harness"
require_relative "../support/pinning"

seconds = ARGV.shift
rounds = Integer(ARGV.shift)
sides = ARGV.map { |a| a.split("=", 2) }
redis = Demo::ThrowawayRedis.new.start
puts Bench::Pinning.start
Bench::Pinning.server(redis.url)
puts "load: #{File.read("/proc/loadavg").strip}"
child = File.expand_path("ab_child.rb", __dir__)
results = Hash.new { |h, k| h[k] = [] }
rounds.times do |r|
  order = r.even? ? sides : sides.reverse
  order.each do |name, lib|
    out = IO.popen(["ruby", "-I#{lib}", child, redis.url, seconds, name], &:read)
    results[name] << JSON.parse(out, symbolize_names: true)
  end
end
puts "load: #{File.read("/proc/loadavg").strip}"
med = ->(xs) { xs.sort[xs.size / 2] }
%i[mutex limiter].each do |kind|
  puts
  puts "| #{kind}, 1 thread | cycles/s median (best) | Redis commands/cycle | Redis CPU µs/cycle median | " \
       "EVALSHA µs/cycle median | client CPU µs/cycle median |"
  puts "|---|---:|---:|---:|---:|---:|"
  sides.each do |name, _|
    rows = results[name].map { |r| r[kind] }
    puts format("| %s | %s (%s) | %.2f | %.1f | %.1f | %.1f |", name, Bench.number(med.call(rows.map { |x| x[:rate] })),
                Bench.number(rows.map { |x| x[:rate] }.max), med.call(rows.map { |x| x[:commands] }),
                med.call(rows.map { |x| x[:redis_us] }), med.call(rows.map { |x| x[:script_us] }),
                med.call(rows.map { |x| x[:client_us] }))
  end
end
