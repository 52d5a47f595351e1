# frozen_string_literal: true

module FerrolockTest
  # How many jobs of a key perform at this instant and the most ever seen, counted in Redis by the jobs
  # themselves (one script each, so the count is exact across threads and processes). Loaded by the
  # specs' apps in their own processes (Sidekiq, Solid Queue, Shoryuken) and by the specs: no dependency.
  module MostAtOnce
    # INCR the key's count and keep its maximum, atomically.
    ENTER = <<~LUA
      local now = redis.call('INCR', KEYS[1])
      if now > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], now) end
      return now
    LUA

    module_function

    # Runs the block counted in at `now_key`, the most at once kept at `max_key`; the block gets the
    # count with itself in. `redis` is anything with Redis' `call(*command)`: Ferrolock.client, a
    # redis-rb client.
    def counted(redis, now_key, max_key)
      yield redis.call("EVAL", ENTER, "2", now_key, max_key)
    ensure
      redis.call("DECR", now_key)
    end
  end
end
