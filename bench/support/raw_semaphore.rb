# frozen_string_literal: true

require "securerandom"
require "redis"

module Bench
  # The limiter benches' baseline: a hand-rolled redis-rb semaphore (a sorted set of tokens
  # scored by expiry: one Lua acquire that purges and counts, ZREM to release; no leases, no
  # wake-ups), one per thread (one redis-rb connection each). A free-slot cycle is two commands.
  class RawSemaphore
    ACQUIRE = <<~LUA
      local t = redis.call('TIME')
      local now = t[1] * 1000 + math.floor(t[2] / 1000)
      redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
      if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
        return 1
      end
      return 0
    LUA

    def initialize(key, limit)
      @redis = Redis.new(url: Bench.redis_url)
      @sha = @redis.script(:load, ACQUIRE)
      @key = key
      @limit = limit
    end

    def try_acquire(token)
      @redis.evalsha(@sha, keys: [@key], argv: [token, @limit, 30_000]) == 1
    end

    def release(token)
      @redis.zrem(@key, token)
    end

    # Retries every 100 ms, as hand-written limiters do.
    def within_limit
      token = SecureRandom.uuid
      sleep 0.1 until try_acquire(token)
      begin
        yield
      ensure
        release(token)
      end
    end
  end
end
