-- Gives a job's slot back and promotes the oldest blocked jobs into the free slots, in one step
-- (FIFO); with no job_id it only frees slots whose lease ran out and promotes (the timer's
-- visit to a key whose earliest lease is due, lib/ferrolock/active_job/expiry_timer.rb).
-- KEYS[1] slots, KEYS[2] blocked, KEYS[3] jobs, KEYS[4] the operators' override (as in admit.lua),
-- KEYS[5] the job's started record (admit.lua's KEYS[6])
-- ARGV[1] job_id ('' : none), ARGV[2] limit ('' : the one stored by the last job blocked),
-- ARGV[3] the TTL of blocked and jobs (ms), ARGV[4] the promotion of the copy giving its slot back
-- (0: none, or not a copy's give-back: a release after perform, a timer's visit)
-- Returns {1 when the job held a live slot (0: its lease had run out, so its slot was counted as
-- free already and is not freed again; -1: no job_id), earliest live slot expiry (ms, -1: none),
-- blocked count, 1 when this call left no job parked where some was (0 otherwise), parked count
-- (blocked, or promoted and not started), promoted job_id, its payload, its promotion
-- (promote.lua), ...}. A job that gives its slot back is done with its payload too (one promoted whose enqueue
-- could not be made: it is dropped). The member goes at most once, so a late or
-- repeated release never frees a slot someone else holds now. A copy of another promotion than the
-- one that started (it failed before it performed) gives back nothing: the slot is the running
-- copy's. A job promoted more than once, given back before any copy started (force-released, a
-- copy that failed before it performed), leaves a started record "open:<last promotion>" (KEYS[5]).

-- The arguments by name (their slots are listed above).
local job_id = ARGV[1]
local limit = tonumber(ARGV[2])
local blocked_ttl_ms = ARGV[3]
local copy = tonumber(ARGV[4]) or 0

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local waited = parked() > 0

-- Which copy of the job started (admit.lua's record "<started>:<last promotion>"; nil: none known).
local function started_copy()
  local record = copy > 0 and redis.call('GET', KEYS[5])
  return record and tonumber(string.match(record, '^(%d+):'))
end

local held = -1
local started = job_id ~= '' and started_copy()
if started and started ~= copy then
  held = 0
elseif job_id ~= '' then
  local score = redis.call('ZSCORE', KEYS[1], job_id)
  held = (score and tonumber(score) > now) and 1 or 0
  if score then
    redis.call('ZREM', KEYS[1], job_id)
  end
  -- A job promoted more than once whose entry goes before a copy of it started has copies queued:
  -- the record "open:<last promotion>" lets the first to perform claim the job (admit.lua) and
  -- makes the others duplicates.
  local entry = redis.call('HGET', KEYS[3], job_id)
  if entry then
    local _, n = parse_entry(entry)
    if n > 1 then
      redis.call('SET', KEYS[5], string.format('open:%d', n), 'PX', blocked_ttl_ms, 'NX')
    end
    redis.call('HDEL', KEYS[3], job_id)
  end
end

limit = limit or tonumber(redis.call('HGET', KEYS[3], '{limit}') or '') or 1
-- The operators' override's limit in force (0: paused, nobody is promoted).
limit = limit_in_force(KEYS[4], limit)

-- Frees expired slots and promotes the oldest blocked jobs (promote.lua).
local promoted = promote(now, limit, nil)

local n = settle(blocked_ttl_ms)
local waiting = redis.call('LLEN', KEYS[2])
local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local r = {held, first[2] and tonumber(first[2]) or -1, waiting, (waited and n == 0) and 1 or 0, n}
for i = 1, #promoted do
  r[#r + 1] = promoted[i]
end
return r
