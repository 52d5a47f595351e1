-- Takes one slot of a concurrency limiter for a token if fewer than `limit` are live.
-- KEYS[1] slots (zset token -> lease expiry, ms of Redis time), KEYS[2] waiters (zset token -> mark expiry)
-- ARGV[1] token, ARGV[2] limit, ARGV[3] lease (ms), ARGV[4] how long this caller may wait before its
-- next attempt (ms; 0 = it will not wait)
-- Returns {1, 0} when the token holds a slot (also when it already did: a retried call whose first
-- reply was lost), else {0, ms until the earliest live slot expires}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, limit, lease, wait_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

-- A slot whose lease ran out belongs to a holder that stopped renewing (crashed): it is free.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)

local function keep_for(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

if redis.call('ZSCORE', KEYS[1], token) or redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now + lease, token)
  keep_for(KEYS[1], lease)
  redis.call('ZREM', KEYS[2], token)
  return {1, 0}
end

-- Full. Mark this caller as waiting in the same atomic step, so the release that follows knows
-- to signal and no wake-up can fall between the failed attempt and the wait.
if wait_ms > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('ZADD', KEYS[2], now + wait_ms, token)
  keep_for(KEYS[2], wait_ms)
end
local earliest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(earliest[2]) - now}
