# frozen_string_literal: true

# Runs every scenario in demo/scenarios/ and prints a report (bin/demo).
require "ferrolock"
require_relative "demo"
require_relative "throwaway_redis"

if ENV["REDIS_URL"]
  Demo.redis_url = ENV["REDIS_URL"]
  where = "REDIS_URL"
else
  redis = Demo::ThrowawayRedis.new.start
  Demo.redis_url = redis.url
  where = "throwaway redis-server on port #{redis.port}"
end

Ferrolock.configure { |c| c.redis_url = Demo.redis_url }
Dir[File.join(__dir__, "scenarios", "*.rb")].each { |file| require file }

puts "ferrolock #{Ferrolock::VERSION} demo (#{where})"
failed = Demo.scenarios.reject do |scenario|
  puts
  puts "== #{scenario.title}"
  report = Demo::Report.new
  started = Demo.monotonic
  begin
    scenario.block.call(report)
  rescue StandardError => e
    report.check("finished without error", false, "#{e.class}: #{e.message}")
  end
  report.lines.each { |line| puts "   #{line}" }
  puts format("   (%.2f s)", Demo.monotonic - started)
  report.failures.empty?
end

puts
if failed.empty?
  puts "all #{Demo.scenarios.size} scenarios ran as expected"
else
  puts "#{failed.size} of #{Demo.scenarios.size} scenarios did not behave: #{failed.map(&:title).join("; ")}"
  exit 1
end
