-- Releases the mutex if the token still holds it, handing it straight to the first waiter whose
-- wait has not ended (FIFO): the lock is set to that waiter's token with a fresh fencing token,
-- which is pushed to the waiter's grant list, so it enters without another attempt.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters (list of "token|deadline ms"),
-- KEYS[4] this token's own grant list
-- ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] fencing counter ttl (ms), ARGV[4] grant list key
-- prefix (the waiter's token follows), ARGV[5] '1' when the token also leaves the line (a waiter
-- that gave up: its entries and any grant not popped yet go), ARGV[6] '1' on a Redis Cluster,
-- ARGV[7] the releasing process's next local waiter ('' if none; see src/line/local/mod.rs) and
-- ARGV[8] how long it will wait (ms): its entry joins the TAIL of the line before the hand-off
-- (so other processes keep their turns), and it never runs an attempt of its own.
-- ARGV[9] the line's TTL (ms; the one every writer sets, see acquire.lua), ARGV[10] '1' when the
-- line's TTL must be set after queueing the local waiter: the client asks only when its process's
-- last setting of it does not cover the new entry's wait (src/line/local/mod.rs). A list this script
-- makes anew (LPUSH back, or RPUSH into none) always gets it. Processes using one name with
-- different leases set different TTLs: a shorter one may then make the line expire before an
-- entry queued without the PEXPIRE ends. At worst that entry is lost: its waiter waits out its
-- turn (at most a lock TTL) and attempts again, queueing anew, as after a lost wake-up; the lock
-- and the grants are not touched.
-- ARGV[11] the local waiter's grant inbox ('' : none) and ARGV[12] the inbox channels' prefix.
-- An entry "token|deadline|@inbox" is granted by PUBLISHing "token|fence" to the inbox's channel
-- (src/inbox.rs); an entry without one (an older version's waiter, or an ACL without channel
-- rights) by pushing the fence to its grant list. An older version's release reads an inbox
-- entry's deadline as 0 and drops it as dead: its waiter attempts again after the holder's TTL.
-- Returns 1 released (or handed on), 0 not held by this token (lost), {1, entry} when the local
-- waiter was queued as entry (it may be the one handed the lock).
--
-- The next waiter's grant list cannot be declared in KEYS (who waits is read here). On a Redis
-- Cluster slot being migrated, touching a key that is not on this node fails the script where it
-- stands, so on a cluster that key is probed before the lock is written: if it cannot be reached
-- here, the waiter's entry goes back where it was and the script returns TRYAGAIN with the lock
-- unchanged; the client sends it again (to the new owner once the migration ends). Off a cluster
-- every key is on this one server, and the probe is skipped.
--
-- Commands when handing over: LPOP, TIME, SET (lock, GET: the token check), SET (fence), PUBLISH
-- (to an inbox; to a grant list: RPUSH, PEXPIRE); queueing a local waiter adds RPUSH (its
-- entry) and, when others still wait after it and the client asks (ARGV[10]: rarely, the line's
-- TTL is long), PEXPIRE (the line). When nobody waits: LPOP, GETDEL (the token check and the
-- release in one command; a lock found not ours is put back, see below).
--
-- The token check rides on the SET that hands the lock over (SET ... GET returns what was there).
-- When it was not this token's (its lease was lost), everything is put back: the lock's value
-- (with a fresh lease of this name's TTL: its remaining TTL was overwritten, so a holder that
-- died meanwhile may block up to one lease longer), the chosen entry at the head, the local
-- waiter's entry out.

-- The arguments by name (their slots are listed above).
local own_token = ARGV[1]
local lease_ms = ARGV[2]
local fence_ttl_ms = ARGV[3]
local grant_prefix = ARGV[4]
local leave_line = ARGV[5]
local on_cluster = ARGV[6]
local successor = ARGV[7]
local successor_wait_ms = ARGV[8]
local line_ttl_ms = ARGV[9]
local refresh_line = ARGV[10]
local successor_inbox = ARGV[11]
local inbox_prefix = ARGV[12]

-- An older version kept a string "someone waits" mark under the waiters key: read as no line.
local function line_call(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    return false
  end
  return reply
end

local mine = own_token .. '|'
-- Only a waiter leaving the line reads the lock first (it must clean up whether it holds or not).
local checked = leave_line == '1'
if checked then
  local holds = redis.call('GET', KEYS[1]) == own_token
  -- Leaving the line (rare: a waiter that gave up): its entries and any grant not popped yet.
  for _, entry in ipairs(line_call('LRANGE', KEYS[3], 0, -1) or {}) do
    if string.sub(entry, 1, #mine) == mine then
      redis.call('LREM', KEYS[3], 0, entry)
    end
  end
  redis.call('DEL', KEYS[4])
  if not holds then
    return 0
  end
end

local now_us
local function read_time()
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The local successor's entry, at the tail, as acquire.lua would queue it.
local queued, length
if successor and successor ~= '' then
  read_time()
  queued = successor .. '|' .. string.format('%d', math.floor(now_us / 1000) + tonumber(successor_wait_ms))
  if successor_inbox and successor_inbox ~= '' then
    queued = queued .. '|@' .. successor_inbox
  end
  length = redis.pcall('RPUSH', KEYS[3], queued)
  if type(length) == 'table' and length.err then
    redis.call('DEL', KEYS[3])
    length = redis.call('RPUSH', KEYS[3], queued)
  end
end
local function done()
  if queued then
    return {1, queued}
  end
  return 1
end

-- Pop up to the first entry (not this token's own) whose wait has not ended. Redis time is read
-- only once somebody waits; the entries popped before it are dead (or this holder's own).
local popped = 0
local next_entry, next_token, next_deadline, next_inbox
while true do
  local entry = line_call('LPOP', KEYS[3])
  if not entry then
    break
  end
  popped = popped + 1
  if not now_us then
    read_time()
  end
  -- "token|deadline", or "token|deadline|@inbox" (a token never contains '|').
  local token, deadline, inbox = string.match(entry, '^(.*)|(%d+)|@(%w+)$')
  if not token then
    token, deadline = string.match(entry, '^(.*)|(%d+)$')
  end
  deadline = tonumber(deadline) or 0
  if token and string.sub(entry, 1, #mine) ~= mine and deadline > math.floor(now_us / 1000) then
    next_entry, next_token, next_deadline, next_inbox = entry, token, deadline, inbox
    break
  end
end
if not next_token then
  -- Nobody waits any more (the popped dead entries are gone with the list). A local waiter
  -- queued above would have been chosen, so nothing is to be undone when the lock is not ours.
  if checked then
    redis.call('DEL', KEYS[1])
    return done()
  end
  -- The usual uncontended release: one command checks the token and deletes. A lock that was
  -- not ours (the lease was lost) is put back, with a fresh lease of this name's TTL as for a
  -- hand-off found not ours below.
  local was = redis.call('GETDEL', KEYS[1])
  if was ~= own_token then
    if was then
      redis.call('SET', KEYS[1], was, 'PX', lease_ms)
    end
    return 0
  end
  return done()
end

-- Puts the line back as it was before this script (but the dead entries popped).
local function undo_line()
  if queued and next_entry ~= queued then
    redis.call('LREM', KEYS[3], -1, queued)
  end
  if next_entry ~= queued then
    redis.call('LPUSH', KEYS[3], next_entry)
  end
  -- The LPUSH may make the list anew: it gets the TTL every writer sets.
  redis.call('PEXPIRE', KEYS[3], line_ttl_ms)
end
local grant = grant_prefix .. next_token
if on_cluster == '1' and not next_inbox then
  local probe = redis.pcall('EXISTS', grant)
  if type(probe) == 'table' and probe.err then
    -- Undone as it was: the client sends the script again, queueing the local waiter anew.
    undo_line()
    return redis.error_reply('TRYAGAIN the next waiter\'s grant key is not on this node yet')
  end
end

if checked then
  redis.call('SET', KEYS[1], next_token, 'PX', lease_ms)
else
  local was = redis.call('SET', KEYS[1], next_token, 'PX', lease_ms, 'GET')
  if was ~= own_token then
    if was then
      redis.call('SET', KEYS[1], was, 'PX', lease_ms)
    else
      redis.call('DEL', KEYS[1])
    end
    undo_line()
    return 0
  end
end

-- The fencing rule of acquire.lua: max(last + 1, Redis time in µs) rounded up to a multiple of
-- 16 (the 15 tokens above are the new holder's to hand on in its process), usually in one command.
local function block(n)
  return n + (16 - n % 16) % 16
end
local fence = block(now_us)
local last = tonumber(redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', fence_ttl_ms, 'GET') or 0) or 0
if last >= fence then
  fence = block(last + 1)
  redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', fence_ttl_ms)
end
if next_inbox then
  -- Refused (no channel rights) only where the waiter could not subscribe either: it then
  -- finds the lock its own at its next attempt.
  redis.pcall('PUBLISH', inbox_prefix .. next_inbox, next_token .. '|' .. string.format('%d', fence))
else
  redis.call('RPUSH', grant, string.format('%d', fence))
  -- The waiter pops it within its wait (or removes it when it gives up): the TTL only catches
  -- a waiter that died.
  redis.call('PEXPIRE', grant, next_deadline - math.floor(now_us / 1000) + 1000)
end
-- The local waiter's entry outlives its wait, as acquire.lua keeps the line (only when others
-- still wait: a line just emptied is gone), when the client asks, or when the RPUSH above made
-- the list (then the pop reached its only entry, so it is gone again: kept as a guard).
if queued and popped < length and (refresh_line == '1' or length == 1) then
  redis.call('PEXPIRE', KEYS[3], line_ttl_ms)
end
return done()
