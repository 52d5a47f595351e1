-- Extends a string-valued lease if it is still ours.
-- KEYS[1] lease key; ARGV[1] owner token, ARGV[2] ttl (ms). Returns 1 renewed, 0 lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
