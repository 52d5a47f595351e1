# frozen_string_literal: true

# bin/bench [name ...]: runs bench/<name>.rb (all when none) on a throwaway Redis.
require "ferrolock"
require_relative "harness"

# peers installs other languages' libraries under tmp/peers/ first and guard is a quick subset of the
# others (bin/test runs it): they run only when named. shoryuken_sqs runs alone, in the modern root
# (bin/bench shoryuken-sqs).
not_by_default = %w[harness run peers guard shoryuken_sqs]
names = ARGV.empty? ? Dir[File.join(__dir__, "*.rb")].map { |f| File.basename(f, ".rb") } - not_by_default : ARGV
names.sort.each do |name|
  path = File.join(__dir__, "#{name}.rb")
  abort "bin/bench: no benchmark #{name} (#{path})" unless File.exist?(path)
  require path
end

redis = Demo::ThrowawayRedis.new.start
Bench.redis_url = redis.url
puts "ferrolock #{Ferrolock::VERSION} benchmarks: #{Bench.machine}; redis-server on loopback"
Bench.benchmarks.each do |name, block|
  # Each starts from the same configuration: one may change it (fair_tenant's modes) and reset it.
  Ferrolock.reset_config!
  Ferrolock.configure { |c| c.redis_url = redis.url }
  puts
  puts "### #{name}"
  puts
  puts block.call
end
