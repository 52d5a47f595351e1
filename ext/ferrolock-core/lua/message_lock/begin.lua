-- Claims a message for one delivery, or says why not.
-- KEYS[1] state key; ARGV[1] this delivery's token, ARGV[2] lease (ms).
-- The state key holds nothing (never seen or lease expired), a token (in progress) or
-- "processed" (done). Returns "run" when this token now holds the in-progress lease (also when
-- it already did: a retried call whose first reply was lost), "processed", or "in_progress".

-- The arguments by name (their slots are listed above).
local token = ARGV[1]
local lease_ms = ARGV[2]

local state = redis.call('GET', KEYS[1])
if state == false then
  redis.call('SET', KEYS[1], token, 'PX', lease_ms)
  return 'run'
end
if state == token then
  redis.call('PEXPIRE', KEYS[1], lease_ms)
  return 'run'
end
if state == 'processed' then
  return 'processed'
end
return 'in_progress'
