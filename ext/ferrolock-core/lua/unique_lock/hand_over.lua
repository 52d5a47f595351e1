-- Hands a uniqueness lock from one job to another (on_conflict: :replace), if the first holds it.
-- KEYS[1] lock key; ARGV[1] the holding jid; ARGV[2] the new jid; ARGV[3] ttl (ms).
-- Returns 1 handed over, 0 not held by ARGV[1] (left alone).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
