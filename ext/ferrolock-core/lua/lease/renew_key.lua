-- Extends a string-valued lease if it is still ours.
-- KEYS[1] lease key; ARGV[1] owner token, ARGV[2] ttl (ms). Returns 1 renewed, 0 lost.

-- The arguments by name (their slots are listed above).
local token = ARGV[1]
local ttl_ms = ARGV[2]

if redis.call('GET', KEYS[1]) == token then
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
  return 1
end
return 0
