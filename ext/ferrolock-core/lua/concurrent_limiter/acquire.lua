-- Takes one slot of a concurrency limiter for a token if fewer than `limit` are live; a caller
-- that will wait joins the FIFO line in the same atomic step, so the release that follows hands
-- it a slot (release.lua) and no wake-up can fall between the failed attempt and the wait.
-- KEYS[1] slots (zset token -> lease expiry, ms of Redis time; and '{limit}' -> -limit),
-- KEYS[2] line (list of "token|deadline ms"), KEYS[3] this token's grant list
-- ARGV[1] token, ARGV[2] limit, ARGV[3] lease (ms), ARGV[4] how long this caller will wait before
-- its next attempt (ms; 0 = it will not wait), ARGV[5] this token's entry in the line from an
-- earlier attempt ('' if none), ARGV[6] '1' when the token may hold a slot already (a retried
-- call whose reply was lost, or a waiter coming back whose grant raced its timeout), ARGV[7] the
-- line's TTL (ms; see the end), ARGV[8] the waiter's grant inbox ('' : none, it pops its grant
-- list; see src/inbox.rs): its entry then ends in '|@' and the inbox id
-- KEYS[4] the operators' override (hash: 'limit', 'paused' '1', 'ttl' ms; written by
-- override.lua): the limit in force is 0 while paused, else its 'limit',
-- else ARGV[2]. Read in this very script, so a change holds for the next attempt of every process.
-- Returns {1, 0} when the token holds a slot, {0, ms until the earliest live slot expires, entry}
-- when queued as entry, else {0, ms until the earliest live slot expires}.

-- The arguments by name (their slots are listed above).
local maybe_ours = ARGV[6]
local line_ttl_ms = ARGV[7]
local inbox = ARGV[8]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, limit, lease, wait_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
-- The caller's own limit, kept in '{limit}' whatever the override says.
local configured = limit
local queued = ARGV[5]

local function held()
  if queued ~= '' then
    redis.call('LREM', KEYS[2], 1, queued)
  end
  return {1, 0}
end

-- Only a caller that may hold a slot already asks (a fresh token's first attempt cannot).
if maybe_ours == '1' then
  local expiry = redis.call('ZSCORE', KEYS[1], token)
  if expiry and tonumber(expiry) > now then
    -- A hand-off may have left a grant nobody will pop now.
    redis.call('DEL', KEYS[3])
    -- The lease starts now. The grant may have been written on another connection (an earlier
    -- attempt cut short, a releaser's hand-off): the WAIT that follows (min_replicas_acked)
    -- covers it only after a write of this call's own, and PEXPIRE is one even when nothing
    -- changes (a ZADD to the same score is not replicated).
    redis.call('ZADD', KEYS[1], 'XX', now + lease, token)
    redis.call('PEXPIRE', KEYS[1], math.max(redis.call('PTTL', KEYS[1]), lease))
    return held()
  end
end

-- One HMGET when no override exists. One in use is kept: it expires only after 'ttl' ms in which
-- no acquisition read it.
local override = redis.call('HMGET', KEYS[4], 'limit', 'paused', 'ttl')
if override[3] then
  redis.call('PEXPIRE', KEYS[4], override[3])
end
if override[2] == '1' then
  limit = 0
elseif override[1] then
  limit = tonumber(override[1])
end

-- Live slots only: one whose lease ran out belongs to a holder that stopped renewing (crashed)
-- and is free. A small limit reads every member at once, oldest expiry first ('{limit}', scored
-- -limit; expired slots; live ones): the live count, the earliest and latest expiry, and whether
-- any expired slot is left to drop, in one command. A large limit, or a key with more members
-- than that read takes (crashed holders piled up), counts the live slots, drops the expired ones
-- and reads the key's TTL.
local live = '(' .. now
local in_use, earliest, latest
-- Whether every member was read (`expired` then says whether any is left to drop).
local complete, expired = false, true
if limit <= 16 then
  local cap = 2 * limit + 2
  local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, cap)
  if #members < 2 * cap then
    complete, in_use, expired = true, 0, false
    for i = 1, #members, 2 do
      local score = tonumber(members[i + 1])
      if score > now then
        in_use = in_use + 1
        earliest = earliest or score
        latest = score
      elseif members[i] ~= '{limit}' then
        expired = true
      end
    end
  end
end
if not in_use then
  in_use = redis.call('ZCOUNT', KEYS[1], live, '+inf')
end

if in_use < limit then
  -- Expired members are dropped here, so a busy name does not collect crashed holders.
  if expired then
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  end
  -- The limit rides along as member '{limit}' scored -limit (never live, never a token: tokens
  -- have no braces), for the operators' view: no extra command, gone with the key (the latest
  -- caller to take a free slot wins when callers pass different limits).
  redis.call('ZADD', KEYS[1], now + lease, token, -configured, '{limit}')
  -- The key outlives every live slot (renew.lua keeps that too). Knowing them all, one PEXPIRE
  -- sets exactly that; otherwise it is only ever lengthened.
  if complete then
    redis.call('PEXPIRE', KEYS[1], math.max(lease, (latest or now) - now))
  elseif redis.call('PTTL', KEYS[1]) < lease then
    redis.call('PEXPIRE', KEYS[1], lease)
  end
  return held()
end

if not earliest then
  earliest = redis.call('ZRANGEBYSCORE', KEYS[1], live, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
end
-- None live (paused, or a limit of 0): the waiter checks again at its shortest turn (1 s).
local expires_in = earliest and (tonumber(earliest) - now) or 0
if wait_ms <= 0 then
  return {0, expires_in}
end

-- Full: join the line. The entry's deadline (Redis time) is when this caller stops waiting for
-- this turn: a release skips entries past it, so a waiter that died is never handed a slot later.
local entry = token .. '|' .. string.format('%d', now + wait_ms)
if inbox and inbox ~= '' then
  entry = entry .. '|@' .. inbox
end
-- A waiter coming back after its turn's wait ended keeps its place in the line.
local at = false
if queued ~= '' then
  at = redis.call('LPOS', KEYS[2], queued)
end
if at then
  redis.call('LSET', KEYS[2], at, entry)
else
  redis.call('RPUSH', KEYS[2], entry)
end
-- The line outlives every entry: a waiter plans at most max(lease, 1 s) + 1 s per turn, and
-- every writer of the line sets the same TTL, twice that (src/concurrent_limiter.rs,
-- `line_ttl`), so a refresh only ever extends the line's life (no PTTL read; PEXPIRE GT would
-- need Redis 7). A process that set it at T knows the line lives until T + that TTL, and its
-- releases skip the PEXPIRE while that covers the entry they queue (release.lua). A process
-- with a longer lease than another's (or an older version, which set max(lease, 1 s) + 1 s)
-- may see the line expire early after the other's write:
-- at worst its entry is lost, then it attempts again after its turn's wait, as after a lost
-- wake-up.
redis.call('PEXPIRE', KEYS[2], line_ttl_ms)
return {0, expires_in, entry}
