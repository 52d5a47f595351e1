# frozen_string_literal: true

# Redis time of one uncontended DistMutex cycle (acquire + release, no waiter) with today's scripts
# beside designs that issue the fencing token lazily (only when the holder asks), a compare-and-delete
# peer and raw SET NX PX + DEL: INFO commandstats, every command run (inside scripts too) and the µs
# of the commands clients sent (scripts included), per cycle; rounds alternate the cases, medians.
# The lazy rows are prototypes made here from the real scripts (nothing in ext/ changes): they show
# what such a design would save, not that it is safe (doc/BENCHMARKS.md, "Lazy fencing tokens").
# ruby -Ilib bench/probes/cycle_cost.rb [rounds] [cycles]
require "redis"
require "securerandom"
require_relative "../harness"
require_relative "../support/pinning"

LUA = File.expand_path("../../ext/ferrolock-core/lua/dist_mutex", __dir__)
ROUNDS = Integer(ARGV[0] || 5)
CYCLES = Integer(ARGV[1] || 20_000)

# acquire.lua with a lazy first branch: the lock alone (SET NX PX), no TIME and no token.
def lazy_acquire(source)
  anchor = "local now_us = time_us()\n"
  raise "acquire.lua changed: no #{anchor.strip.inspect}" unless source.include?(anchor)

  source.sub(anchor, <<~LUA + anchor)
    if redis.call('SET', KEYS[1], token, 'NX', 'PX', lease_ms) then
      return {1, 0}
    end
  LUA
end

r = Demo::ThrowawayRedis.new.start
pinning = Bench::Pinning.start
Bench::Pinning.server(r.url)
c = Redis.new(url: r.url)
load = ->(src) { c.script(:load, src) }
acquire = File.read("#{LUA}/acquire.lua")
sha = { acquire: load.call(acquire), lazy: load.call(lazy_acquire(acquire)),
        release: load.call(File.read("#{LUA}/release.lua")), refence: load.call(File.read("#{LUA}/refence.lua")),
        cad: load.call("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0") }
k = "ferrolock:{probe}"
lock = "#{k}:lock"
keys = ->(t) { [lock, "#{k}:fence", "#{k}:waiters", "#{k}:grant:#{t}"] }
# The arguments the client sends on the uncontended path (src/dist_mutex.rs: 30 s lease, a planned wait).
acquire_args = ->(t) { [t, "30000", "31000", "300000", "", "0", "62000", "0123456789ab"] }
release_args = ->(t) { [t, "30000", "300000", "#{k}:grant:", "0", "0", "", "0", "62000", "0", "", "ferrolock:inbox:"] }
release = ->(t) { c.evalsha(sha[:release], keys: keys[t], argv: release_args[t]) }
set_nx = ->(t) { c.set(lock, t, nx: true, px: 30_000) }
cases = {
  "eager (today): acquire.lua + release.lua" => lambda { |t|
    c.evalsha(sha[:acquire], keys: keys[t], argv: acquire_args[t])
    release[t]
  },
  "lazy in acquire.lua + release.lua" => lambda { |t|
    c.evalsha(sha[:lazy], keys: keys[t], argv: acquire_args[t])
    release[t]
  },
  "lazy, plain SET NX PX + release.lua" => ->(t) { set_nx[t] && release[t] },
  "lazy, SET NX PX + token asked (refence.lua) + release.lua" => lambda { |t|
    set_nx[t]
    c.evalsha(sha[:refence], keys: keys[t].first(2), argv: [t, "30000", "300000"])
    release[t]
  },
  "peer: SET NX PX + compare-and-delete script" => lambda { |t|
    set_nx[t]
    c.evalsha(sha[:cad], keys: [lock], argv: [t])
  },
  "raw: SET NX PX + DEL" => ->(t) { set_nx[t] && c.del(lock) }
}
sent = %w[evalsha set del]
results = Hash.new { |h, name| h[name] = [] }
ROUNDS.times do
  cases.each do |name, cycle|
    token = SecureRandom.hex(16)
    500.times { cycle.call(token) }
    c.call("CONFIG", "RESETSTAT")
    CYCLES.times { cycle.call(token) }
    stats = c.info("commandstats").except("info", "config")
    results[name] << [stats.sum { |_, s| s["calls"].to_i }.fdiv(CYCLES),
                      sent.sum { |name_sent| stats.dig(name_sent, "usec").to_i }.fdiv(CYCLES)]
  end
end
puts "#{pinning}; load average #{File.read("/proc/loadavg").split.first(3).join(" ")}; " \
     "#{ROUNDS} rounds x #{CYCLES} cycles, medians"
puts "| cycle | commands | Redis µs |", "|---|---:|---:|"
results.each do |name, rows|
  puts format("| %s | %.1f | %.1f |", name, Bench.median(rows.map(&:first)), Bench.median(rows.map(&:last)))
end
