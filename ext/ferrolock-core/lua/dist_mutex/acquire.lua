-- Takes the mutex for a token unless another token holds it; a caller that will wait joins the
-- FIFO of waiters in the same atomic step, so the release that follows hands the lock to it.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters (list of "token|deadline ms"),
-- KEYS[4] this token's grant list
-- ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] how long this caller will wait (ms; 0 = it won't),
-- ARGV[4] how long the fencing counter outlives the last acquisition (ms; '0': issue no token,
-- the holder's mutex was made with fencing: false),
-- ARGV[5] this token's entry in the waiters list from an earlier attempt ('' if none),
-- ARGV[6] '1' when this token may hold the lock already (a retry, or a waiter coming back),
-- ARGV[7] the line's TTL (ms; see the end), ARGV[8] the waiter's grant inbox ('' : none, it pops
-- its grant list; see src/inbox.rs): its entry then ends in '|@' and the inbox id
-- Returns {1, fencing token (0 unfenced)} when held (also when this token already holds it: a retried call
-- whose first reply was lost, or a hand-off this waiter has not popped yet), {0, holder's
-- remaining ttl in ms, entry} when queued as entry, else {0, holder's remaining ttl in ms}.

-- The arguments by name (their slots are listed above).
local token = ARGV[1]
local lease_ms = ARGV[2]
local wait_ms = tonumber(ARGV[3])
local fence_ttl_ms = ARGV[4]
local queued = ARGV[5]
local maybe_ours = ARGV[6]
local line_ttl_ms = ARGV[7]
local inbox = ARGV[8]

-- The next fencing token is max(last + 1, Redis time in µs). The counter key expires, and once
-- it has, "last" is forgotten: but the key expired at least its TTL after the last token was
-- issued, and tokens run ahead of Redis time only while one name is acquired more than once per
-- µs (each acquisition takes an acquire and a release script, or a >= 1 ms expiry), so by a few
-- µs at most: time alone then beats every earlier token. Redis expires keys by the same wall
-- clock TIME reads, so a clock stepped back delays the expiry too. See src/dist_mutex.rs.
-- (release.lua issues tokens by the same rule for a hand-off.)
-- Every token issued here is rounded up to a multiple of 16 (exact: Lua numbers are doubles,
-- tokens < 2^53): the 15 above it are never issued by Redis, and are the holder's to hand on
-- within its process (the cohort hand-off, src/line/cohort.rs), so they stay below the next token.
-- The rounding puts a token at most 15 µs ahead of Redis time, less than one acquisition takes.
local function block(n)
  return n + (16 - n % 16) % 16
end
local function time_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function issue(now_us)
  local now = block(now_us)
  -- One round trip to the counter in the usual case: write Redis time, read what was there.
  -- %d keeps every digit (a plain number argument would be sent as "%.17g").
  local last = tonumber(redis.call('SET', KEYS[2], string.format('%d', now), 'PX', fence_ttl_ms, 'GET') or 0) or 0
  if last < now then
    return now
  end
  local fence = block(last + 1)
  redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', fence_ttl_ms)
  return fence
end

local fenced = fence_ttl_ms ~= '0'
local function entered()
  if queued ~= '' then
    redis.call('LREM', KEYS[3], 1, queued)
  end
end

-- Unfenced, a free lock is taken with one plain SET: no token to issue, so no Redis time to
-- read for it (PX counts from this script's start, which only an expiry-only lock's spacing,
-- always fenced, would mind).
if not fenced and redis.call('SET', KEYS[1], token, 'NX', 'PX', lease_ms) then
  entered()
  return {1, 0}
end

-- The lease ends lease_ms after the Redis time read here (PXAT, rounded up to the next ms), not
-- after the time Redis took when this script started (what PX counts from): Redis may have
-- waited for a CPU between the two, and the next holder's grant must come at least lease_ms
-- after this one's fencing token on the clock TIME reads (the spacer's promise, expire: n).
local now_us = time_us()
local lease_until_ms = math.floor((now_us + 999) / 1000) + tonumber(lease_ms)
if fenced and redis.call('SET', KEYS[1], token, 'NX', 'PXAT', string.format('%d', lease_until_ms)) then
  entered()
  return {1, issue(now_us)}
end
-- Only a caller that may hold it already asks (a first attempt by a fresh token cannot).
if maybe_ours == '1' and redis.call('GET', KEYS[1]) == token then
  -- Ours already. A hand-off may have left a grant nobody will pop now.
  redis.call('DEL', KEYS[4])
  -- The lease starts now, and renewing it is a write of this call's own: the grant may have been
  -- written on another connection (an earlier attempt cut short, a releaser's hand-off), so only
  -- a write here makes the WAIT that follows (min_replicas_acked) cover it.
  redis.call('PEXPIRE', KEYS[1], lease_ms)
  entered()
  if not fenced then
    return {1, 0}
  end
  -- The counter may have expired under a long-renewed hold: issuing anew is still in order,
  -- as this token is the latest holder.
  local fence = tonumber(redis.call('GET', KEYS[2]) or 0) or 0
  if fence == 0 then
    fence = issue(now_us)
  end
  return {1, fence}
end
local pttl = redis.call('PTTL', KEYS[1])
if wait_ms <= 0 then
  return {0, pttl}
end
-- The entry's deadline (Redis time) is when this caller stops waiting for this turn: a release
-- skips entries past it, so a waiter that died is never handed the lock later than that.
local now_ms = math.floor(now_us / 1000)
local entry = token .. '|' .. string.format('%d', now_ms + wait_ms)
if inbox and inbox ~= '' then
  entry = entry .. '|@' .. inbox
end
-- A waiter coming back after its wait for this turn ended keeps its place in the line.
local at = false
if queued ~= '' then
  at = redis.call('LPOS', KEYS[3], queued)
end
local function push()
  local length = redis.pcall('RPUSH', KEYS[3], entry)
  if type(length) == 'table' and length.err then
    -- An older version's string "someone waits" mark under this key: the line replaces it.
    redis.call('DEL', KEYS[3])
    length = redis.call('RPUSH', KEYS[3], entry)
  end
  return length
end
if at then
  redis.call('LSET', KEYS[3], at, entry)
else
  push()
end
-- The list outlives every entry: a waiter plans at most one lock TTL + 1 s per turn, and every
-- writer of the line sets the same TTL, 2 x (lock TTL + 1 s) (src/dist_mutex.rs, `line_ttl`),
-- so a refresh only ever extends the line's life (no PTTL read; PEXPIRE GT would need Redis 7).
-- A process that set it at T knows the line lives until T + that TTL, and its releases skip
-- the PEXPIRE while that covers the entry they queue (release.lua). A process with a longer
-- lease than another's (or an older version, which set lock TTL + 1 s) may see the line expire
-- early after the other's write: at worst its entry is lost, and it attempts again after the
-- holder's TTL, as after a lost wake-up.
redis.call('PEXPIRE', KEYS[3], line_ttl_ms)
return {0, pttl, entry}
