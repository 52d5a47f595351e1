-- An operator's read of the override (src/concurrent_limiter/limit_override.rs, read_override),
-- written in front of override_state.lua; read-only (it does not refresh the TTL: only an
-- admission keeps an override alive). KEYS[1] the override.
-- Returns {limit or false, 1 paused / 0}: {false, 0} when there is none.
return override_reply(KEYS[1])
