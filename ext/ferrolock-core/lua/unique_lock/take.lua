-- Takes a job's uniqueness lock unless another job holds it.
-- KEYS[1] lock key; ARGV[1] the job's jid; ARGV[2] ttl (ms); ARGV[3] "keep": a lock this jid
-- already holds keeps its expiry (until_expired), "set": its expiry becomes ttl.
-- Returns the holding jid when another job holds the lock, else false (nil): this jid holds it.

-- The arguments by name (their slots are listed above).
local jid = ARGV[1]
local ttl_ms = ARGV[2]
local on_held = ARGV[3]

local holder = redis.call('GET', KEYS[1])
if holder and holder ~= jid then return holder end
if holder and on_held == 'keep' then return false end
redis.call('SET', KEYS[1], jid, 'PX', ttl_ms)
return false
