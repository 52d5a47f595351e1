-- Drops a delivery's in-progress lease after its job raised, so the next copy (SQS's
-- redelivery) runs it at once instead of waiting out lease.
-- KEYS[1] state key; ARGV[1] the delivery's token. Returns 1 dropped, 0 not ours (left alone).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
