-- Marks a message processed after its job succeeded.
-- KEYS[1] state key; ARGV[1] the delivery's token, ARGV[2] processed_ttl (ms).
-- Returns 1 when our lease became "processed"; 0 when the lease had lapsed and nobody else had
-- claimed the message (marking it is still the truth: the job did run, and the mark keeps later
-- copies from running it again); -1 when another delivery holds or finished it (left alone).

-- The arguments by name (their slots are listed above).
local token = ARGV[1]
local processed_ttl_ms = ARGV[2]

local state = redis.call('GET', KEYS[1])
if state == token then
  redis.call('SET', KEYS[1], 'processed', 'PX', processed_ttl_ms)
  return 1
end
if state == false then
  redis.call('SET', KEYS[1], 'processed', 'PX', processed_ttl_ms)
  return 0
end
return -1
