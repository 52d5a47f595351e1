-- Drops a delivery's in-progress lease after its job raised, so the next copy (SQS's
-- redelivery) runs it at once instead of waiting out lease.
-- KEYS[1] state key; ARGV[1] the delivery's token. Returns 1 dropped, 0 not ours (left alone).

-- The arguments by name (their slots are listed above).
local token = ARGV[1]

if redis.call('GET', KEYS[1]) == token then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
