-- Sets the expiry of a job's uniqueness lock (lease renewal, retry hold), if the job holds it.
-- KEYS[1] lock key; ARGV[1] the job's jid; ARGV[2] ttl (ms). Returns 1 set, 0 not held by this jid.

-- The arguments by name (their slots are listed above).
local jid = ARGV[1]
local ttl_ms = ARGV[2]

if redis.call('GET', KEYS[1]) == jid then return redis.call('PEXPIRE', KEYS[1], ttl_ms) end
return 0
