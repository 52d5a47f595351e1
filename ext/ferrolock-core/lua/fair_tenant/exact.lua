-- Records one enqueue of a (job class, tenant) in a sorted set of jids scored by Redis time,
-- and says which rule it now breaks. One script, so the record, the trim and every rule's count
-- are one atomic step and one round trip, whatever the number of rules.
-- KEYS[1] sorted set (member jid, score ms)
-- ARGV[1] jid, ARGV[2] 1 = record this enqueue, 0 = only evaluate (a re-push already counted),
-- ARGV[3] the longest window (ms), ARGV[4] number of rules n, then n pairs: window (ms),
-- threshold.
-- Returns the index (1-based) of the LAST rule whose count within its window exceeds its
-- threshold, or 0.

-- The arguments by name (their slots are listed above).
local jid = ARGV[1]
local record = ARGV[2]
local longest = tonumber(ARGV[3])
local rule_count = ARGV[4]

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local key = KEYS[1]
-- Entries at or before now - longest can match no rule any more.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - longest)
-- NX: a jid pushed again (retry, scheduled job) keeps its first time and counts once.
if record == '1' and redis.call('ZADD', key, 'NX', now, jid) == 1 then
  redis.call('PEXPIRE', key, longest)
end
-- After the trim the set holds exactly the longest window, so its size bounds every rule's
-- count: a rule whose threshold it does not exceed needs no ZCOUNT (the usual case).
local total = redis.call('ZCARD', key)
for i = tonumber(rule_count), 1, -1 do
  local threshold = tonumber(ARGV[4 + 2 * i])
  if total > threshold then
    local per = tonumber(ARGV[3 + 2 * i])
    -- Scores are whole ms: "within per" is score > now - per, i.e. >= now - per + 1.
    if per == longest or redis.call('ZCOUNT', key, now - per + 1, '+inf') > threshold then
      return i
    end
  end
end
return 0
