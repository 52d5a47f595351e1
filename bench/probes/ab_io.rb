# frozen_string_literal: true

# Pinned A/B of bench/probes/limiter_io.rb: two redis-servers (lock, io) on the first CPU, the children on the
# others, each child loading its own lib/; ROUNDS rounds, sides alternating.
#   ruby bench/probes/ab_io.rb MODE SECONDS ROUNDS name=/path/to/lib name=/path/to/lib ...
require_relative "../harness"
require_relative "../support/pinning"
require "fileutils"

mode, seconds = ARGV.shift(2)
rounds = Integer(ARGV.shift)
sides = ARGV.map { |a| a.split("=", 2) }
lock = Demo::ThrowawayRedis.new.start
io = Demo::ThrowawayRedis.new.start
puts Bench::Pinning.start
Bench::Pinning.server(lock.url)
Bench::Pinning.server(io.url)
puts "load: #{File.read("/proc/loadavg").strip}"
tool = File.expand_path("limiter_io.rb", __dir__)
FileUtils.mkdir_p(File.expand_path("../../tmp", __dir__))
rounds.times do |r|
  (r.even? ? sides : sides.reverse).each do |name, lib|
    stat = File.expand_path("../../tmp/perf-#{name}.csv", __dir__) # the repo's tmp/ (gitignored)
    out = IO.popen({ "LOCK_URL" => lock.url, "IO_URL" => io.url },
                   ["perf", "stat", "-x", ",", "-o", stat, "-e", "context-switches,task-clock", "--",
                    "ruby", "-I#{lib}", tool, mode, seconds], &:read)
    csv = File.read(stat).lines.grep(/,/).to_h do |l|
      f = l.split(",")
      [f[2], f[0].to_f]
    end
    blocks = out[%r{([\d.]+) blocks/s}, 1].to_f * Float(seconds)
    puts format("%-6s %s | whole run: %.2f switches/block, %.1f µs task-clock/block", name, out.strip,
                csv["context-switches"] / blocks, 1000 * csv["task-clock"] / blocks)
  end
end
puts "load: #{File.read("/proc/loadavg").strip}"
