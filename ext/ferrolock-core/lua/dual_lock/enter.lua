-- One turn of a duplicate: run now, wait, or skip. Called on arrival and again by the waiter
-- when its wait for a turn ends without a hand-off, so the same rules decide both (only the WAIT
-- owner can promote itself).
-- KEYS[1] wait lock, KEYS[2] exec lock, KEYS[3] this token's grant list
-- ARGV[1] token, ARGV[2] the WAIT lock's lease (ms), ARGV[3] the EXEC lock's lease (ms)
-- Returns {1, 0} run (EXEC is ours), {0, exec pttl} wait (WAIT is ours), {-1, 0} skip (another
-- duplicate already waits).

-- The arguments by name (their slots are listed above).
local token = ARGV[1]
local wait_lease_ms = ARGV[2]
local exec_lease_ms = ARGV[3]

local exec = redis.call('GET', KEYS[2])
if exec == token then
  -- A retried call whose first reply was lost, or a hand-off the waiter has not popped (its
  -- grant would never be popped now).
  redis.call('DEL', KEYS[3])
  -- EXEC's lease starts now, and renewing it is a write of this call's own, so the WAIT that
  -- follows (min_replicas_acked) covers a grant written on another connection.
  redis.call('PEXPIRE', KEYS[2], exec_lease_ms)
  return {1, 0}
end
local wait = redis.call('GET', KEYS[1])
if exec == false and (wait == false or wait == token) then
  redis.call('SET', KEYS[2], token, 'PX', exec_lease_ms)
  if wait == token then
    redis.call('DEL', KEYS[1])
  end
  return {1, 0}
end
if wait == false then
  redis.call('SET', KEYS[1], token, 'PX', wait_lease_ms)
  return {0, redis.call('PTTL', KEYS[2])}
end
if wait == token then
  return {0, redis.call('PTTL', KEYS[2])}
end
return {-1, 0}
