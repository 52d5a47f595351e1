-- Records one enqueue of a (job class, tenant) in a sorted set of jids scored by Redis time,
-- and says which rule it now breaks. One script, so the record, the trim and every rule's count
-- are one atomic step and one round trip, whatever the number of rules.
-- KEYS[1] sorted set (member jid, score ms)
-- ARGV[1] jid, ARGV[2] 1 = record this enqueue, 0 = only evaluate (a re-push already counted),
-- ARGV[3] number of rules n, then n pairs: window (ms), threshold.
-- Returns the index (1-based) of the LAST rule whose count within its window exceeds its
-- threshold, or 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[3])
local longest = 0
for i = 1, n do
  local per = tonumber(ARGV[2 + 2 * i])
  if per > longest then longest = per end
end
-- Entries at or before now - longest can match no rule any more.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - longest)
if ARGV[2] == '1' then
  -- NX: a jid pushed again (retry, scheduled job) keeps its first time and counts once.
  redis.call('ZADD', KEYS[1], 'NX', now, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], longest)
end
local result = 0
for i = 1, n do
  local per = tonumber(ARGV[2 + 2 * i])
  local threshold = tonumber(ARGV[3 + 2 * i])
  if redis.call('ZCOUNT', KEYS[1], '(' .. (now - per), '+inf') > threshold then
    result = i
  end
end
return result
