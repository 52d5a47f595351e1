-- Leaves the dual lock: deletes EXEC and/or WAIT where this token holds them (token-checked, so
-- a lock that expired and was taken by another duplicate is never deleted). Used at the end of
-- a run and when a waiter gives up or is interrupted. EXEC freed while another duplicate waits
-- goes straight to that waiter (FIFO: it arrived during this run, so it runs right after): EXEC
-- is set to its token, its WAIT deleted, and a grant pushed to its own list, so it runs without
-- another attempt.
-- KEYS[1] wait lock, KEYS[2] exec lock, KEYS[3] this token's grant list
-- ARGV[1] token, ARGV[2] the EXEC lock's lease (ms), ARGV[3] grant list key prefix (the
-- waiter's token follows), ARGV[4] '1' when the token was waiting (a grant not popped yet goes
-- too)
-- Returns 1 when EXEC was ours and is released (or handed on), else 0.
--
-- The waiter's grant list cannot be declared in KEYS (who waits is read here). On a Redis
-- Cluster slot being migrated, touching a key that is not on this node fails the script where it
-- stands, so the reads come first and the grant push (a pcall) is the first write: if the key
-- cannot be reached here, the script returns TRYAGAIN having changed nothing.

-- The arguments by name (their slots are listed above).
local token = ARGV[1]
local exec_lease_ms = ARGV[2]
local grant_prefix = ARGV[3]
local was_waiting = ARGV[4]

local wait = redis.call('GET', KEYS[1])
local exec = redis.call('GET', KEYS[2])
local next_token = exec == token and wait and wait ~= token and wait
if next_token then
  local grant = grant_prefix .. next_token
  local pushed = redis.pcall('RPUSH', grant, '1')
  if type(pushed) == 'table' and pushed.err then
    return redis.error_reply('TRYAGAIN the waiter\'s grant key is not on this node yet')
  end
  -- The waiter pops it at once (or finds EXEC its own at its next turn, which deletes it): the
  -- TTL only catches a waiter that died, whose EXEC expires with the same TTL.
  redis.call('PEXPIRE', grant, exec_lease_ms)
end
if wait == token then
  redis.call('DEL', KEYS[1])
end
if was_waiting == '1' then
  redis.call('DEL', KEYS[3])
end
if exec ~= token then
  return 0
end
if next_token then
  redis.call('SET', KEYS[2], next_token, 'PX', exec_lease_ms)
  redis.call('DEL', KEYS[1])
else
  redis.call('DEL', KEYS[2])
end
return 1
