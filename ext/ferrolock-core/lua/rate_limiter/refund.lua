-- Gives back the slot of a call that will not run (interrupted while it waited for its
-- reservation, or its reply was lost), when that cannot let more than `count` through:
-- - gcra and window: only the latest call can be taken back (by its id), returning the state
--   to at least as strict as it was before that call; a slot reserved before later ones stays
--   used (taking it back would let a newcomer in beside the later reservations).
-- - sliding_window: any entry can go (fewer entries never break "count per span", and new
--   entries are placed from what is left).
-- Idempotent: the id is cleared (or the member removed), so a repeat does nothing.
-- KEYS[1] the limiter's key, ARGV[1] kind ('gcra', 'window' or 'sliding_window'),
-- ARGV[2] the call's id, ARGV[3] cost, ARGV[4] emission (µs, gcra)
-- Returns 1 if a slot was given back, else 0.

-- The arguments by name (their slots are listed above).
local kind, call_id, cost = ARGV[1], ARGV[2], tonumber(ARGV[3])
local emission = tonumber(ARGV[4])

if kind == 'sliding_window' then
  return redis.call('ZREM', KEYS[1], call_id)
end
if redis.call('HGET', KEYS[1], 'id') ~= call_id then
  return 0
end
if kind == 'gcra' then
  local tat = tonumber(redis.call('HGET', KEYS[1], 't')) - cost * emission
  redis.call('HSET', KEYS[1], 't', string.format('%.17g', tat))
else
  redis.call('HINCRBY', KEYS[1], 'n', -cost)
end
redis.call('HDEL', KEYS[1], 'id')
return 1
