-- Which of the jobs this process parked on one key are still parked (their payload kept).
-- KEYS[1] the key's `jobs` hash; ARGV job ids. Returns one 1 (parked) or 0 (gone) per id.

local out = {}
for i, job_id in ipairs(ARGV) do
  out[i] = redis.call('HEXISTS', KEYS[1], job_id)
end
return out
