-- Releases the mutex if the token still holds it, handing it straight to the first waiter whose
-- wait has not ended (FIFO): the lock is set to that waiter's token with a fresh fencing token,
-- which is pushed to the waiter's grant list, so it enters without another attempt.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters (list of "token|deadline ms")
-- ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] fencing counter ttl (ms), ARGV[4] grant list key
-- prefix (the waiter's token follows), ARGV[5] '1' when the token also leaves the line (a waiter
-- that gave up: its entries and any grant not popped yet go)
-- Returns 1 released (or handed on), 0 not held by this token (lost).

-- An older version kept a string "someone waits" mark under the waiters key: read as no line.
local function line_call(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    return false
  end
  return reply
end

if ARGV[5] == '1' then
  local mine = ARGV[1] .. '|'
  for _, entry in ipairs(line_call('LRANGE', KEYS[3], 0, -1) or {}) do
    if string.sub(entry, 1, #mine) == mine then
      redis.call('LREM', KEYS[3], 0, entry)
    end
  end
  redis.call('DEL', ARGV[4] .. ARGV[1])
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local entry = line_call('LPOP', KEYS[3])
if not entry then
  redis.call('DEL', KEYS[1])
  return 1
end
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
while entry do
  local sep = string.find(entry, '|', 1, true)
  local deadline = sep and tonumber(string.sub(entry, sep + 1)) or 0
  if deadline > now_ms then
    local next_token = string.sub(entry, 1, sep - 1)
    redis.call('SET', KEYS[1], next_token, 'PX', ARGV[2])
    -- The fencing rule of acquire.lua: max(last + 1, Redis time in µs).
    local last = tonumber(redis.call('SET', KEYS[2], string.format('%d', now_us), 'PX', ARGV[3], 'GET') or 0) or 0
    local fence = now_us
    if last >= now_us then
      fence = last + 1
      redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[3])
    end
    local grant = ARGV[4] .. next_token
    redis.call('RPUSH', grant, string.format('%d', fence))
    -- The waiter pops it within its wait (or removes it when it gives up): the TTL only
    -- catches a waiter that died.
    redis.call('PEXPIRE', grant, deadline - now_ms + 1000)
    return 1
  end
  entry = line_call('LPOP', KEYS[3])
end
redis.call('DEL', KEYS[1])
return 1
