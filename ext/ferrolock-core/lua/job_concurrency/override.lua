-- The operators' override of a limits_concurrency key's limit (Admin#set_limit, #pause, #resume,
-- #clear_override with kind: :limits_concurrency, through src/job_concurrency.rs), written in
-- front of concurrent_limiter/override_state.lua (the same hash as a ConcurrentLimiter's).
-- admit.lua and release.lua read it in the same atomic step as the slots: paused, every job is
-- blocked (never discarded); a lowered limit lets fewer in, never evicting a holder. The blocked
-- jobs a resume or a raised limit lets in are promoted by the timers' next visit of the key: the
-- caller makes the key due at once in their index (another hash tag: not in this script).
-- KEYS[1] the override, KEYS[2] blocked; ARGV[1] the action, ARGV[2] the limit (set_limit),
-- ARGV[3] the override's TTL (ms).
-- Returns {limit or false, 1 paused / 0, blocked count}.

local reply = apply_override(KEYS[1])
if reply.err then
  return reply
end
reply[3] = redis.call('LLEN', KEYS[2])
return reply
