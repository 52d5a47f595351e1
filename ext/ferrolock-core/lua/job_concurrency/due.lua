-- Claims the limits_concurrency keys whose earliest lease is due, for one timer to visit
-- (release.lua with no job_id). Each claimed key is put off by `recheck`, so timers of other
-- processes skip it meanwhile, and a timer that died mid-visit is covered by the next one.
-- KEYS[1] due (zset key name -> earliest lease expiry of a key with blocked jobs, ms of Redis time)
-- ARGV[1] recheck (ms), ARGV[2] how many keys at most, ARGV[3] the index's TTL (ms)
-- Returns {ms until the next entry is due (-1: none left), the claim (the score the claimed keys
-- got: forget.lua drops an entry only while it still has it), key names claimed...}.

-- The arguments by name (their slots are listed above).
local recheck_ms = tonumber(ARGV[1])
local max_keys = ARGV[2]
local index_ttl_ms = ARGV[3]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local claim = now + recheck_ms
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, max_keys)
for _, name in ipairs(due) do
  redis.call('ZADD', KEYS[1], claim, name)
end
if #due > 0 then
  redis.call('PEXPIRE', KEYS[1], index_ttl_ms)
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local r = {first[2] and math.max(tonumber(first[2]) - now, 0) or -1, claim}
for _, name in ipairs(due) do
  r[#r + 1] = name
end
return r
