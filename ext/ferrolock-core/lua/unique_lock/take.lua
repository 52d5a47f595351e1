-- Takes a job's uniqueness lock unless another job holds it.
-- KEYS[1] lock key; ARGV[1] the job's jid; ARGV[2] ttl (ms); ARGV[3] "keep": a lock this jid
-- already holds keeps its expiry (until_expired), "set": its expiry becomes ttl.
-- Returns the holding jid when another job holds the lock, else false (nil): this jid holds it.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return holder end
if holder and ARGV[3] == 'keep' then return false end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
