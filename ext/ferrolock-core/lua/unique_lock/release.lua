-- Frees a job's uniqueness lock, unless another job holds it now (left alone).
-- KEYS[1] lock key; ARGV[1] the job's jid. Returns 1 freed, 0 not held by this jid.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
