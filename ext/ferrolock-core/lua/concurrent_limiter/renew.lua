-- Extends a held slot's lease if the token still holds a live one.
-- KEYS[1] slots; ARGV[1] token, ARGV[2] lease (ms). Returns 1 renewed, 0 lost.

-- The arguments by name (their slots are listed above).
local token = ARGV[1]
local lease = tonumber(ARGV[2])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('ZSCORE', KEYS[1], token)
if not expiry then
  return 0
end
if tonumber(expiry) <= now then
  -- Already expired: others may have counted the slot as free, so it must not come back.
  redis.call('ZREM', KEYS[1], token)
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + lease, token)
-- Never shortens the key's life, and always writes: a ZADD to the same score (a hand-off granted
-- in this very ms) is not replicated, and the WAIT after a hand-off's renewal
-- (min_replicas_acked, handoff::ack_grant) covers the grant only after a write of its own.
redis.call('PEXPIRE', KEYS[1], math.max(redis.call('PTTL', KEYS[1]), lease))
return 1
