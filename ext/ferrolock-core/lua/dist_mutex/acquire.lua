-- Takes the mutex for a token unless another token holds it.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters mark
-- ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] how long this caller will wait (ms; 0 = it won't)
-- Returns {1, fencing token} when held (also when this token already holds it: a retried call
-- whose first reply was lost), else {0, holder's remaining ttl in ms}.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1, tonumber(redis.call('GET', KEYS[2]) or 0)}
end
-- Mark that someone waits, in the same atomic step as the failed attempt, so the release that
-- follows knows to signal and no wake-up falls between the two.
local wait_ms = tonumber(ARGV[3])
if wait_ms > 0 and redis.call('PTTL', KEYS[3]) < wait_ms then
  redis.call('SET', KEYS[3], '1', 'PX', wait_ms)
end
return {0, redis.call('PTTL', KEYS[1])}
