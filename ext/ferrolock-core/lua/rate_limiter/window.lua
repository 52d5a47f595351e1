-- Fixed window: at most `count` calls per window, windows aligned to Redis time (window k covers
-- [k * interval, (k + 1) * interval) microseconds since the epoch), so every process agrees on them.
-- A call that finds the current window full RESERVES a place in the first later window with
-- room, if that window starts within its wait: reservations fill windows in order, so every
-- window from the current one up to the stored one is full, and one counter is enough.
-- KEYS[1] hash {w = the latest window with a call, n = calls counted in it, id = the latest call's id}
-- ARGV[1] count, ARGV[2] interval (µs), ARGV[3] longest wait (µs), ARGV[4] the call's id
-- Returns {1, calls left in its window, slot, µs until the slot} when the call got a place,
-- else {0, µs until the next window with room}; times are Redis time in µs.

-- The arguments by name (their slots are listed above).
local count, interval, max_wait = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local call_id = ARGV[4]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local window, used = math.floor(now / interval), 0
local stored = redis.call('HMGET', KEYS[1], 'w', 'n')
local latest = tonumber(stored[1])
if latest and latest >= window then
  window, used = latest, tonumber(stored[2])
end
if used >= count then
  window, used = window + 1, 0
end
local wait = math.max(0, window * interval - now)
if wait > max_wait then
  return {0, wait}
end
redis.call('HSET', KEYS[1], 'w', window, 'n', used + 1, 'id', call_id)
-- The counter means nothing once its window is over.
redis.call('PEXPIRE', KEYS[1], math.ceil(((window + 1) * interval - now) / 1000))
return {1, count - used - 1, now + wait, wait}
