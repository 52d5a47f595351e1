# frozen_string_literal: true

# EVALSHA usec_per_call of trivial scripts, to split a script's Redis time into fixed cost and work.
require "redis"
require_relative "../harness"
require_relative "../support/pinning"
r = Demo::ThrowawayRedis.new.start
Bench::Pinning.start
Bench::Pinning.server(r.url)
c = Redis.new(url: r.url)
cases = {
  "return 1, 0 keys 0 args" => ["return 1", [], []],
  "return 1, 4 keys 8 args" => ["return 1", %w[a b c d], %w[1 2 3 4 5 6 7 8]],
  "TIME only, 4 keys 8 args" => ["local t = redis.call('TIME') return 1", %w[a b c d], %w[1 2 3 4 5 6 7 8]],
  "SET NX PX + DEL (2 calls)" => [
    "redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', 10000) redis.call('DEL', KEYS[1]) return 1", %w[k], %w[v]
  ]
}
cases.each do |name, (src, keys, args)|
  sha = c.script(:load, src)
  500.times { c.evalsha(sha, keys: keys, argv: args) }
  c.call("CONFIG", "RESETSTAT")
  20_000.times { c.evalsha(sha, keys: keys, argv: args) }
  s = c.info("commandstats")
  puts format("%-28s evalsha %.2f µs/call", name, s.dig("evalsha", "usec_per_call").to_f)
end
