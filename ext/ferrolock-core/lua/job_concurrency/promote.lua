-- Shared by admit.lua and release.lua, which src/job_concurrency.rs declares with this file in
-- front of them (Lua scripts cannot require): the keys are theirs (KEYS[1] slots, KEYS[2]
-- blocked, KEYS[3] jobs, as in admit.lua).

-- A parked job's entry in jobs: "<lease ms>|<payload>" while it was never promoted (also every
-- entry written before promotions were numbered), "<lease ms>:<promotion>|<payload>" once it was:
-- the number of its last promotion, which the enqueued copy carries (admit.lua's ARGV[10]).
-- Returns lease ms, promotion (0: none), payload.
local function parse_entry(entry)
  local ms, n, body = string.match(entry, '^(%d+):(%d+)|(.*)$')
  if not ms then
    ms, body = string.match(entry, '^(%d+)|(.*)$')
    n = 0
  end
  return tonumber(ms), tonumber(n), body
end

local function entry_value(ms, n, body)
  if n > 0 then
    return string.format('%d:%d|', ms, n) .. body
  end
  return string.format('%d|', ms) .. body
end

-- Jobs whose payload is kept here (blocked, or promoted and not started yet).
local function parked()
  return redis.call('HLEN', KEYS[3]) - redis.call('HEXISTS', KEYS[3], '{limit}')
end

-- Frees the slots whose lease ran out at `now` (their holder stopped renewing: it crashed, or was
-- paused past its lease; a promoted job that never started goes back to the head of the line),
-- then the oldest blocked jobs take the free slots up to `limit` (each with its own class's
-- lease). `starting`: the job_id of a job starting now (nil: none); a copy of it found in the line
-- (the queue delivered it twice) takes its slot itself instead of being promoted. Each promotion
-- of a job gets the next number (kept in its entry): a job promoted again because its copy did not
-- start within its lease has two copies in the queue, and only one of them may run (admit.lua).
-- Returns the promoted jobs ({job_id, payload, promotion, ...}) and the live slots' count.
local function promote(now, limit, starting)
  local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  if #expired > 0 then
    for i = #expired, 1, -1 do
      if redis.call('HEXISTS', KEYS[3], expired[i]) == 1 then
        redis.call('LPUSH', KEYS[2], expired[i])
      end
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  end

  local live = redis.call('ZCARD', KEYS[1])
  local promoted = {}
  while live < limit do
    local next_id = redis.call('LPOP', KEYS[2])
    if not next_id then
      break
    end
    local entry = redis.call('HGET', KEYS[3], next_id)
    if entry then
      local ms, n, body = parse_entry(entry)
      redis.call('ZADD', KEYS[1], now + ms, next_id)
      live = live + 1
      if next_id == starting then
        redis.call('HDEL', KEYS[3], next_id)
      else
        redis.call('HSET', KEYS[3], next_id, entry_value(ms, n + 1, body))
        promoted[#promoted + 1] = next_id
        promoted[#promoted + 1] = body
        promoted[#promoted + 1] = n + 1
      end
    end
  end
  return promoted, live
end

-- The keys' TTLs once a script's writes are done; returns how many jobs are parked. While a job's
-- payload is kept (blocked, or promoted and not started), the slots key lives as long as the
-- payloads: a promoted job whose enqueue was lost is brought back by seeing its expired slot,
-- which must still be there when its lease has run out. Once none is, only the limit is left
-- (dropped) and the slots key lives until its last lease ends.
local function settle(blocked_ttl_ms)
  local n = parked()
  if n > 0 then
    redis.call('PEXPIRE', KEYS[3], blocked_ttl_ms)
    if redis.call('EXISTS', KEYS[2]) == 1 then
      redis.call('PEXPIRE', KEYS[2], blocked_ttl_ms)
    end
    if redis.call('EXISTS', KEYS[1]) == 1 then
      redis.call('PEXPIRE', KEYS[1], blocked_ttl_ms)
    end
    return n
  end
  redis.call('DEL', KEYS[3])
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', KEYS[1], last[2])
  end
  return 0
end
