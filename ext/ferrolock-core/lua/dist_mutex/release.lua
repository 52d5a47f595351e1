-- Releases the mutex if the token still holds it, and wakes one waiter if any waits.
-- KEYS[1] lock, KEYS[2] waiters mark, KEYS[3] signal list; ARGV[1] token
-- Returns 1 released, 0 not held by this token (lost).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local waiting_ms = redis.call('PTTL', KEYS[2])
if waiting_ms > 0 then
  redis.call('LPUSH', KEYS[3], '1')
  redis.call('LTRIM', KEYS[3], 0, 0)
  redis.call('PEXPIRE', KEYS[3], waiting_ms)
end
return 1
