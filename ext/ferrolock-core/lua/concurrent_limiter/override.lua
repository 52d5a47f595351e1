-- The operators' override of a ConcurrentLimiter's limit (Admin#set_limit, #pause, #resume,
-- #clear_override, through src/concurrent_limiter/limit_override.rs), written in front of
-- override_state.lua (the hash) and line_entry.lua (the waiters). acquire.lua and release.lua read
-- it in the same atomic step as the slots, so every process obeys it from its next attempt.
-- Holders are never evicted. Anything but a pause wakes the live waiters in line (told 0: they
-- attempt again at once and find the limit in force).
-- KEYS[1] the override, KEYS[2] the line; ARGV[1] the action, ARGV[2] the limit (set_limit),
-- ARGV[3] the override's TTL (ms), ARGV[4] the grant lists' prefix, ARGV[5] the inbox channels'
-- prefix. Who waits is read here, as release.lua does, so their grant lists are not in KEYS.
-- Returns {limit or false, 1 paused / 0}: the override now in force.

-- The arguments past apply_override's three, by name.
local grant_prefix = ARGV[4]
local inbox_prefix = ARGV[5]

local reply = apply_override(KEYS[1])
if reply.err then
  return reply
end
-- (An older version kept a sorted set of waiters elsewhere; the line is a list.)
if ARGV[1] ~= 'pause' and redis.call('TYPE', KEYS[2]).ok == 'list' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, 999)) do
    local who, deadline, inbox = parse(entry)
    if who and deadline > now then
      tell(who, deadline, inbox, 0, now, grant_prefix, inbox_prefix)
    end
  end
end
return reply
