-- Hands a uniqueness lock from one job to another (on_conflict: :replace), if the first holds it.
-- KEYS[1] lock key; ARGV[1] the holding jid; ARGV[2] the new jid; ARGV[3] ttl (ms).
-- Returns 1 handed over, 0 not held by ARGV[1] (left alone).

-- The arguments by name (their slots are listed above).
local jid = ARGV[1]
local new_jid = ARGV[2]
local ttl_ms = ARGV[3]

if redis.call('GET', KEYS[1]) ~= jid then return 0 end
redis.call('SET', KEYS[1], new_jid, 'PX', ttl_ms)
return 1
