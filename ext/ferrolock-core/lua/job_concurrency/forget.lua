-- Drops a key from the index of keys with blocked jobs once the timer's visit found its line
-- empty, but only while the entry is still that visit's claim (the score due.lua gave it). A job
-- blocked since made it due at once (admit: the first blocked job of a line) and another timer's
-- visit re-claims it with a later score: either way the entry stays, so no blocked job is left
-- without one.
-- KEYS[1] due (zset key name -> when to visit, ms of Redis time)
-- ARGV[1] the key name, ARGV[2] the visit's claim
-- Returns 1 when dropped, 0 when left.

-- The arguments by name (their slots are listed above).
local name = ARGV[1]
local claim = tonumber(ARGV[2])

local score = redis.call('ZSCORE', KEYS[1], name)
if score and tonumber(score) == claim then
  return redis.call('ZREM', KEYS[1], name)
end
return 0
