-- Sets the expiry of a job's uniqueness lock (lease renewal, retry hold), if the job holds it.
-- KEYS[1] lock key; ARGV[1] the job's jid; ARGV[2] ttl (ms). Returns 1 set, 0 not held by this jid.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
