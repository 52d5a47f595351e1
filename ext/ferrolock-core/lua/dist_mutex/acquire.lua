-- Takes the mutex for a token unless another token holds it.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters mark
-- ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] how long this caller will wait (ms; 0 = it won't),
-- ARGV[4] how long the fencing counter outlives the last acquisition (ms)
-- Returns {1, fencing token} when held (also when this token already holds it: a retried call
-- whose first reply was lost), else {0, holder's remaining ttl in ms}.

-- The next fencing token is max(last + 1, Redis time in µs). The counter key expires, and once
-- it has, "last" is forgotten: but the key expired at least its TTL after the last token was
-- issued, and tokens run ahead of Redis time only while one name is acquired more than once per
-- µs (each acquisition takes an acquire and a release script, or a >= 1 ms expiry), so by a few
-- µs at most: time alone then beats every earlier token. Redis expires keys by the same wall
-- clock TIME reads, so a clock stepped back delays the expiry too. See doc/ARCHITECTURE.md.
local function issue()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', KEYS[2]) or 0) or 0
  local fence = math.max(last + 1, now)
  -- %d keeps every digit (a plain number argument would be sent as "%.17g").
  redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[4])
  return fence
end

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, issue()}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- The counter may have expired under a long-renewed hold: issuing anew is still in order,
  -- as this token is the latest holder.
  local fence = tonumber(redis.call('GET', KEYS[2]) or 0) or 0
  if fence == 0 then
    fence = issue()
  end
  return {1, fence}
end
-- Mark that someone waits, in the same atomic step as the failed attempt, so the release that
-- follows knows to signal and no wake-up falls between the two.
local wait_ms = tonumber(ARGV[3])
if wait_ms > 0 and redis.call('PTTL', KEYS[3]) < wait_ms then
  redis.call('SET', KEYS[3], '1', 'PX', wait_ms)
end
return {0, redis.call('PTTL', KEYS[1])}
