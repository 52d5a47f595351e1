-- Releases the mutex if the token still holds it, handing it straight to the first waiter whose
-- wait has not ended (FIFO): the lock is set to that waiter's token with a fresh fencing token,
-- which is pushed to the waiter's grant list, so it enters without another attempt.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters (list of "token|deadline ms"),
-- KEYS[4] this token's own grant list
-- ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] fencing counter ttl (ms), ARGV[4] grant list key
-- prefix (the waiter's token follows), ARGV[5] '1' when the token also leaves the line (a waiter
-- that gave up: its entries and any grant not popped yet go)
-- Returns 1 released (or handed on), 0 not held by this token (lost).
--
-- The next waiter's grant list cannot be declared in KEYS (who waits is read here). On a Redis
-- Cluster slot being migrated, touching a key that is not on this node fails the script where it
-- stands, so that key is probed before anything is written: if it cannot be reached here, the
-- script returns TRYAGAIN having changed nothing, and the client sends it again (to the new
-- owner once the migration ends).

-- An older version kept a string "someone waits" mark under the waiters key: read as no line.
local function line_call(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    return false
  end
  return reply
end

local holds = redis.call('GET', KEYS[1]) == ARGV[1]
local leaving = ARGV[5] == '1'
if not holds and not leaving then
  return 0
end

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)

-- Read-only first: the first entry of the line (not this token's own) whose wait has not ended,
-- and what lies ahead of it (dead entries, this token's own).
local mine = ARGV[1] .. '|'
local entries = line_call('LRANGE', KEYS[3], 0, -1) or {}
local next_token, next_deadline, dead_ahead, mine_ahead = nil, nil, 0, 0
if holds then
  for _, entry in ipairs(entries) do
    local sep = string.find(entry, '|', 1, true)
    local deadline = sep and tonumber(string.sub(entry, sep + 1)) or 0
    if string.sub(entry, 1, #mine) == mine then
      mine_ahead = mine_ahead + 1
    elseif deadline > now_ms then
      next_token, next_deadline = string.sub(entry, 1, sep - 1), deadline
      break
    else
      dead_ahead = dead_ahead + 1
    end
  end
end
local grant = next_token and (ARGV[4] .. next_token)
if grant then
  local probe = redis.pcall('EXISTS', grant)
  if type(probe) == 'table' and probe.err then
    return redis.error_reply('TRYAGAIN the next waiter\'s grant key is not on this node yet')
  end
end

-- Now the writes.
local ahead = dead_ahead + mine_ahead
if leaving then
  for _, entry in ipairs(entries) do
    if string.sub(entry, 1, #mine) == mine then
      redis.call('LREM', KEYS[3], 0, entry)
    end
  end
  redis.call('DEL', KEYS[4])
  ahead = dead_ahead
end
if not holds then
  return 0
end
if next_token then
  -- Drop what lies ahead of the next waiter, then the waiter itself.
  line_call('LTRIM', KEYS[3], ahead + 1, -1)
else
  -- Nobody waits any more: the line holds only dead entries (and this token's own, unless it left).
  line_call('LTRIM', KEYS[3], ahead, -1)
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('SET', KEYS[1], next_token, 'PX', ARGV[2])
-- The fencing rule of acquire.lua: max(last + 1, Redis time in µs).
local last = tonumber(redis.call('GET', KEYS[2]) or 0) or 0
local fence = math.max(now_us, last + 1)
redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[3])
redis.call('RPUSH', grant, string.format('%d', fence))
-- The waiter pops it within its wait (or removes it when it gives up): the TTL only catches a
-- waiter that died.
redis.call('PEXPIRE', grant, next_deadline - now_ms + 1000)
return 1
