-- Leaves the dual lock: deletes EXEC and/or WAIT where this token holds them (token-checked, so
-- a lock that expired and was taken by another duplicate is never deleted). Used at the end of
-- a run and when a waiter gives up or is interrupted. When EXEC is freed while another
-- duplicate waits, pushes one signal so that waiter wakes now instead of at EXEC's expiry.
-- KEYS[1] wait lock, KEYS[2] exec lock, KEYS[3] signal list; ARGV[1] token
-- Returns 1 when EXEC was ours and is released, else 0.
local token = ARGV[1]
if redis.call('GET', KEYS[1]) == token then
  redis.call('DEL', KEYS[1])
end
if redis.call('GET', KEYS[2]) ~= token then
  return 0
end
redis.call('DEL', KEYS[2])
local waiting_ms = redis.call('PTTL', KEYS[1])
if waiting_ms > 0 then
  redis.call('LPUSH', KEYS[3], '1')
  redis.call('LTRIM', KEYS[3], 0, 0)
  redis.call('PEXPIRE', KEYS[3], waiting_ms)
end
return 1
