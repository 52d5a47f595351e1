-- An operator's read of the override (src/concurrent_limiter/limit_override.rs, read_override),
-- written in front of override_state.lua. KEYS[1] the override; ARGV[1] '1' for a reader that
-- obeys a pause (Shoryuken::QueuePause): a pause it finds stays (its TTL refreshed, as an
-- admission's read refreshes a limiter's); '0' (an operator's look) leaves the TTL alone.
-- Returns {limit or false, 1 paused / 0}: {false, 0} when there is none.
if ARGV[1] ~= '1' then
  return override_reply(KEYS[1])
end
local state = redis.call('HMGET', KEYS[1], 'limit', 'paused', 'ttl')
if state[2] == '1' and state[3] then
  redis.call('PEXPIRE', KEYS[1], state[3])
end
return {state[1] or false, state[2] == '1' and 1 or 0}
