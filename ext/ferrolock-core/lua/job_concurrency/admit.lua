-- Admits an ActiveJob job under limits_concurrency (lib/ferrolock/active_job/concurrency.rb), at
-- enqueue or at perform: it takes a slot, or is blocked (parked here, FIFO) or discarded. Slots
-- whose lease ran out are freed first and the oldest blocked jobs promoted into free slots, so a
-- new job never overtakes a blocked one; the promoted jobs come back for the caller to enqueue.
-- KEYS[1] slots (zset job_id -> lease expiry, ms of Redis time), KEYS[2] blocked (list of
-- job_ids, oldest first), KEYS[3] jobs (hash job_id -> "lease ms|payload" of a blocked job, and
-- "lease ms:promotion|payload" of a promoted one until it starts (promote.lua's parse_entry): a
-- promoted job whose lease runs out before it started goes back to the head of the line, so an
-- enqueue lost between promotion and the queue is not a lost job; and '{limit}' -> the limit,
-- for promotions by a caller that does not know it), KEYS[4] fencing counter, KEYS[5] the
-- operators' override (concurrent_limiter/override_state.lua, in front of this script): its limit
-- replaces ARGV[2]; paused, no slot is taken and every job over it is blocked, whatever
-- on_conflict and max_blocked say (a paused key drops nothing), KEYS[6] this job's started
-- record ("<promotion of the copy that started>:<last promotion issued>", TTL ARGV[9]), written
-- when a promoted job starts and another copy of it may still be queued (it was promoted more
-- than once, or the copy starting is not its last promotion); "open:<last>" (release.lua): the
-- job's entry went before any copy started, and the first copy to perform claims it
-- ARGV[1] job_id, ARGV[2] limit, ARGV[3] lease (ms), ARGV[4] on a conflict: 'block' or
-- 'discard', ARGV[5] the serialized job (kept when blocked), ARGV[6] max_blocked (0: none),
-- ARGV[7] '1' at perform (the job starts: its payload goes and a fencing token is issued),
-- ARGV[8] the fencing counter's TTL (ms), ARGV[9] the TTL of blocked, jobs and started (ms;
-- refreshed by every write, so only a key idle that long expires), ARGV[10] the promotion this
-- copy of the job carries (0: none: never promoted, or enqueued by perform_later)
-- Returns {outcome, fencing token (0 at enqueue), earliest live slot expiry (ms, -1: none),
-- blocked count, 1 when this call left no job parked where some was (0 otherwise), parked count
-- (blocked, or promoted and not started: what the timer's index watches), promoted job_id, its
-- payload, its promotion, ...}; outcome: 'held' (the job holds a slot),
-- 'blocked' (parked now), 'waiting' (parked already: left in its place), 'discarded', 'full'
-- (max_blocked reached: nothing stored), 'duplicate' (at perform: a copy of another promotion
-- of this job started already, so this one must not run; the copy that started may run again: a
-- queue's redelivery, a retry of the same payload).

-- The arguments by name (their slots are listed above).
local job_id = ARGV[1]
local limit = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local on_conflict = ARGV[4]
local payload = ARGV[5]
local max_blocked = tonumber(ARGV[6])
local at_perform = ARGV[7] == '1'
local fence_ttl_ms = ARGV[8]
local blocked_ttl_ms = ARGV[9]
local copy = tonumber(ARGV[10])

-- The code's limit, stored for promotions by callers that do not know it; the override's in force.
local configured = limit
local paused
limit, paused = limit_in_force(KEYS[5], limit)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Whether any job was parked before this call (the caller drops the key from the index once none
-- is: `settle`).
local waited = parked() > 0
-- This job's entry as the call began (nil: neither parked nor promoted and not started), which
-- of its copies started (nil: none remembered) and the last promotion it was given.
local entry = redis.call('HGET', KEYS[3], job_id)
local started, issued, open
local record = redis.call('GET', KEYS[6])
if record then
  local s, n = string.match(record, '^(%d+):(%d+)$')
  started, issued = tonumber(s), tonumber(n)
  if not s then
    open = string.match(record, '^open:(%d+)$')
    issued = tonumber(open)
  end
end

-- Frees expired slots and promotes the oldest blocked jobs (promote.lua); a copy of this very
-- job starting now takes its slot itself.
local promoted, live = promote(now, limit, at_perform and job_id or nil)

local function earliest()
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if first[2] then
    return tonumber(first[2])
  end
  return -1
end

local function reply(outcome, fence)
  local n = settle(blocked_ttl_ms)
  local waiting = redis.call('LLEN', KEYS[2])
  local r = {outcome, fence, earliest(), waiting, (waited and n == 0) and 1 or 0, n}
  for i = 1, #promoted do
    r[#r + 1] = promoted[i]
  end
  return r
end

-- The next fencing token: max(last + 1, Redis time in µs), so tokens never go back, even after
-- the counter expired (see dist_mutex/acquire.lua).
local function issue()
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('SET', KEYS[4], string.format('%d', now_us), 'PX', fence_ttl_ms, 'GET') or 0) or 0
  if last < now_us then
    return now_us
  end
  redis.call('SET', KEYS[4], string.format('%d', last + 1), 'PX', fence_ttl_ms)
  return last + 1
end

local function hold()
  if at_perform then
    if entry then
      -- The first copy to start wins. Only a start that another copy of another promotion may
      -- meet later is remembered: a job promoted once, started by that copy, has no other copy.
      local _, n = parse_entry(entry)
      if n > 1 or n ~= copy then
        redis.call('SET', KEYS[6], string.format('%d:%d', copy, math.max(n, copy)), 'PX', blocked_ttl_ms)
      end
    end
    -- Started: a promoted job's payload is no longer needed to bring it back.
    redis.call('HDEL', KEYS[3], job_id)
    redis.call('ZADD', KEYS[1], now + lease, job_id)
    return reply('held', issue())
  end
  -- At enqueue (a resumption of a job holding its slot): the lease covers its wait in the queue.
  local expiry = tonumber(redis.call('ZSCORE', KEYS[1], job_id) or 0)
  redis.call('ZADD', KEYS[1], math.max(expiry, now + lease), job_id)
  return reply('held', 0)
end

-- No copy had started when the job's entry went (given back or force-released: release.lua wrote
-- "open:<last promotion>"): the first copy to perform claims the job.
if at_perform and not entry and open then
  redis.call('SET', KEYS[6], string.format('%d:%d', copy, math.max(copy, issued)), 'PX', blocked_ttl_ms)
  started = copy
end

-- A copy of another promotion than the one that started (the job was promoted again when its
-- lease ran out while a copy waited in the queue) does not run, not even in the job's slot.
if at_perform and not entry and started and started ~= copy then
  return reply('duplicate', 0)
end

local score = redis.call('ZSCORE', KEYS[1], job_id)
if score and tonumber(score) > now then
  return hold()
end
if redis.call('HEXISTS', KEYS[3], job_id) == 1 then
  return reply('waiting', 0)
end
if live < limit then
  return hold()
end
if on_conflict == 'discard' and not paused then
  return reply('discarded', 0)
end
if max_blocked > 0 and not paused and redis.call('LLEN', KEYS[2]) >= max_blocked then
  return reply('full', 0)
end
redis.call('RPUSH', KEYS[2], job_id)
-- Its promotions go on from the last one it was given (a copy that started, blocked again after a
-- retry), so a copy of this life is never taken for one of an earlier life.
local last = math.max(copy, issued or 0)
redis.call('HSET', KEYS[3], job_id, entry_value(lease, last, payload), '{limit}', configured)
return reply('blocked', 0)
