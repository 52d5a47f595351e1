-- Gives a slot back if the token still holds a live one, handing it straight to the first waiter
-- in line whose wait has not ended (FIFO): the slot's member becomes that waiter's token and a
-- grant is pushed to the waiter's own list, so it enters without another attempt.
-- KEYS[1] slots, KEYS[2] line (list of "token|deadline ms"), KEYS[3] this token's grant list
-- ARGV[1] token, ARGV[2] lease (ms), ARGV[3] grant list key prefix (a waiter's token follows),
-- ARGV[4] '1' when the token also leaves the line (a waiter that gave up: its entries and any
-- grant not popped yet go, and a slot that reached it is handed on), ARGV[5] the releasing
-- process's next local waiter ('' if none; see src/line/local/mod.rs) and ARGV[6] how long it will
-- wait (ms): while this token holds a live slot, its entry joins the TAIL of the line before the
-- hand-off (other processes keep their turns; alone, it is handed this very slot), and it never
-- runs an attempt of its own.
-- ARGV[7] the limit ('' : not known): when at most 16, one read gives this token's slot and the
-- live count, and room left (a slot freed earlier while nobody was in line, whose waiters then
-- waited in their processes) goes to the next live entries too, with a fresh lease each.
-- ARGV[8] the line's TTL (ms; the one every writer sets, see acquire.lua), ARGV[9] '1' when the
-- line's TTL must be set after queueing the local waiter: the client asks only when its
-- process's last setting of it does not cover the new entry's wait (src/line/local/mod.rs). A list
-- this script makes anew (LPUSH back, or RPUSH into none) always gets it. Processes using one
-- name with different leases set different TTLs: a shorter one may then make the line expire
-- before an entry queued without the PEXPIRE ends. At worst that entry is lost: its waiter
-- waits out its turn (at most its planned wait) and attempts again, queueing anew, as after a
-- lost wake-up; slots and grants are not touched.
-- ARGV[10] the local waiter's grant inbox ('' : none) and ARGV[11] the inbox channels' prefix.
-- KEYS[4] the operators' override (see acquire.lua): read only when a waiter is next. Paused, or
-- with as many live slots as the limit in force or more (it was lowered), the slot is not handed
-- on: the waiter goes back to the head of the line, and is woken when the operator resumes or
-- raises it (override.lua). Holders are never evicted.
-- An entry "token|deadline|@inbox" is granted by PUBLISHing "token|slot expiry" to the inbox's
-- channel (src/inbox.rs); one without (an older version's waiter, or an ACL without channel
-- rights) by pushing the expiry to its grant list. An older version's release reads an inbox
-- entry's deadline as 0 and drops it as dead: its waiter attempts again after its planned wait.
-- Returns 1 released (or handed on), 0 the token held no live slot (its lease was lost: nobody
-- queued), {1, entry, room} when the local waiter was queued as entry (it may be the one handed
-- the slot; room: slots still free after this script, for the process's next local waiters).
-- The member is removed at most once, so releasing twice never frees two slots.
--
-- Commands when handing over: TIME, ZRANGEBYSCORE (ZSCORE for a limit over 16), LPOP, PUBLISH
-- (to an inbox; to a grant list: RPUSH, PEXPIRE), ZADD, ZREM;
-- queueing a local waiter adds RPUSH (its entry) and, when others still wait after it and the
-- client asks (ARGV[9]: rarely, the line's TTL is long), PEXPIRE (the line). When nobody waits:
-- TIME, ZRANGEBYSCORE, LPOP, ZREM.
--
-- The next waiter's grant list cannot be declared in KEYS (who waits is read here). On a Redis
-- Cluster slot being migrated, touching a key that is not on this node fails the script where it
-- stands, so the grant push (a pcall) comes before every other write but the line's pop: if the
-- key cannot be reached here, the popped waiter goes back to the head of the line and the script
-- returns TRYAGAIN, and the client sends it again (to the new owner once the migration ends).

-- The arguments by name (their slots are listed above).
local grant_prefix = ARGV[3]
local successor = ARGV[5]
local successor_wait_ms = ARGV[6]
local line_ttl_ms = ARGV[8]
local refresh_line = ARGV[9]
local successor_inbox = ARGV[10]
local inbox_prefix = ARGV[11]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, lease = ARGV[1], tonumber(ARGV[2])
local leave_line = ARGV[4] == '1'

local limit = tonumber(ARGV[7] or '')
local expiry, live
-- Whether a member of this token may be left that is not live (absent or expired).
local maybe_member = false
if limit and limit <= 16 then
  -- The live slots (as acquire.lua reads them): this token's among them, and their count.
  local slots = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 32)
  for i = 1, #slots, 2 do
    if slots[i] == token then
      expiry = tonumber(slots[i + 1])
    end
  end
  if #slots < 64 then
    live = #slots / 2
    maybe_member = not expiry
  elseif not expiry then
    expiry = redis.call('ZSCORE', KEYS[1], token)
    expiry = expiry and tonumber(expiry)
  end
else
  expiry = redis.call('ZSCORE', KEYS[1], token)
  expiry = expiry and tonumber(expiry)
end
local holds = expiry and expiry > now

-- Tells a waiter it was handed a slot expiring at `value` (line_entry.lua, in front of this
-- script, owns the entry's format, `parse`, and the wake-up). False when its grant list is not on
-- this node (a migrating cluster slot): nothing was written.
local function grant(who, deadline, inbox, value)
  return tell(who, deadline, inbox, value, now, grant_prefix, inbox_prefix)
end

-- A token that gives up reads the whole line (rare): its own entries go wherever they are.
local function drop_own_entries()
  for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    if parse(entry) == token then
      redis.call('LREM', KEYS[2], 0, entry)
    end
  end
  redis.call('DEL', KEYS[3])
end

if not holds then
  if leave_line then
    drop_own_entries()
  end
  if expiry or maybe_member then
    -- Expired: others may have counted it as free already, so it must not come back.
    redis.call('ZREM', KEYS[1], token)
  end
  return 0
end

-- The local successor's entry, at the tail, as acquire.lua would queue it (checked above that
-- this token holds a live slot, so it is never queued by a release that hands nothing over).
local queued, length
local successor_wait = tonumber(successor_wait_ms or 0) or 0
if successor and successor ~= '' and not leave_line then
  queued = successor .. '|' .. string.format('%d', now + successor_wait)
  if successor_inbox and successor_inbox ~= '' then
    queued = queued .. '|@' .. successor_inbox
  end
  length = redis.call('RPUSH', KEYS[2], queued)
end
local room = 0
local function done()
  if queued then
    return {1, queued, room}
  end
  return 1
end

local popped = 0
-- The next live entry (not this token's own) off the line; dead ones ahead of it go with it.
local function pop_next()
  while true do
    local entry = redis.call('LPOP', KEYS[2])
    if not entry then
      return nil
    end
    popped = popped + 1
    local who, deadline, inbox = parse(entry)
    if who and who ~= token and deadline > now then
      return who, deadline, entry, inbox
    end
  end
end
local next_token, next_deadline, next_entry, next_inbox = pop_next()
-- The limit in force when the operators' override sets one (nil: the caller's, ARGV[7]).
local in_force = limit
if next_token then
  local override = redis.call('HMGET', KEYS[4], 'limit', 'paused')
  if override[2] == '1' then
    in_force = 0
  elseif override[1] then
    in_force = tonumber(override[1])
  end
  if in_force ~= limit then
    -- This token's slot is among the live ones: it may pass only while they are within the limit.
    local count = live or redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
    if count > in_force then
      redis.call('LPUSH', KEYS[2], next_entry)
      redis.call('PEXPIRE', KEYS[2], line_ttl_ms)
      next_token = nil
    end
  end
end
if next_token then
  if not grant(next_token, next_deadline, next_inbox, expiry) then
    -- Nothing else written yet: the waiter goes back to the head of its line (dead entries
    -- popped before it stay gone), and the local successor's entry out (the client sends the
    -- script again, queueing it anew).
    if queued and next_entry ~= queued then
      redis.call('LREM', KEYS[2], -1, queued)
    end
    if next_entry ~= queued then
      redis.call('LPUSH', KEYS[2], next_entry)
    end
    -- The LPUSH may make the list anew: it gets the TTL every writer sets.
    redis.call('PEXPIRE', KEYS[2], line_ttl_ms)
    return redis.error_reply('TRYAGAIN the next waiter\'s grant key is not on this node yet')
  end
end
if leave_line then
  drop_own_entries()
end
if next_token then
  -- The waiter takes the slot with this lease's expiry (the slots key already outlives it): it
  -- starts renewing within a third of its lease. A lease nearly run out (renewals failed) is
  -- given a whole one instead. Added before this token's member goes, so the key (and its TTL)
  -- never vanishes in between.
  local until_ms = expiry
  if until_ms - now < lease / 2 then
    until_ms = now + lease
    if redis.call('PTTL', KEYS[1]) < lease then
      redis.call('PEXPIRE', KEYS[1], lease)
    end
  end
  redis.call('ZADD', KEYS[1], until_ms, next_token)
end
redis.call('ZREM', KEYS[1], token)
-- Room left (this token's slot is counted in `live`, and stays in use when handed on): the next
-- live entries get a slot each, as a hand-off, with a whole lease.
if live then
  room = in_force - live
  if not next_token then
    room = room + 1
  end
  while room > 0 and next_token do
    local who, deadline, entry, inbox = pop_next()
    if not who then
      break
    end
    if not grant(who, deadline, inbox, now + lease) then
      -- Not on this node (a migrating cluster slot): back at the head, for the next release.
      redis.call('LPUSH', KEYS[2], entry)
      popped = popped - 1
      -- The pop may have emptied the line: the list LPUSH made anew needs its TTL.
      redis.call('PEXPIRE', KEYS[2], line_ttl_ms)
      break
    end
    redis.call('ZADD', KEYS[1], now + lease, who)
    if redis.call('PTTL', KEYS[1]) < lease then
      redis.call('PEXPIRE', KEYS[1], lease)
    end
    room = room - 1
  end
  room = math.max(room, 0)
end
-- The local waiter's entry outlives its wait, as acquire.lua keeps the line (only when others
-- still wait: a line just emptied is gone), when the client asks, or when the RPUSH above made
-- the list (then the pop reached its only entry, so it is gone again: kept as a guard).
if queued and popped < length and (refresh_line == '1' or length == 1) then
  redis.call('PEXPIRE', KEYS[2], line_ttl_ms)
end
return done()
