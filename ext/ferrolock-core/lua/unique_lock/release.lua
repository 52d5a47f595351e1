-- Frees a job's uniqueness lock, unless another job holds it now (left alone).
-- KEYS[1] lock key; ARGV[1] the job's jid. Returns 1 freed, 0 not held by this jid.

-- The arguments by name (their slots are listed above).
local jid = ARGV[1]

if redis.call('GET', KEYS[1]) == jid then return redis.call('DEL', KEYS[1]) end
return 0
