-- Admin's read of a limits_concurrency key (src/job_concurrency/inspect.rs); read-only. KEYS[1]
-- slots, KEYS[2] blocked, KEYS[3] jobs; ARGV[1] how many blocked jobs to name. Returns {now ms,
-- live slots as [job_id, expiry ms, ...], blocked count, the first ARGV[1] blocked job_ids,
-- the stored limit (jobs' '{limit}') or false, the oldest blocked job's payload (its
-- "<lease>|" or "<lease>:<promotion>|" prefix taken off: promote.lua's parse_entry) or false}.
local now = now_ms()
local held = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
local blocked = redis.call('LLEN', KEYS[2])
local first = {}
if blocked > 0 then
  first = redis.call('LRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)
end
local payload = false
if first[1] then
  payload = redis.call('HGET', KEYS[3], first[1])
  if payload then
    payload = (string.gsub(payload, '^%d+:?%d*|', '', 1))
  end
end
return {now, held, blocked, first, redis.call('HGET', KEYS[3], '{limit}'), payload}
