-- Sliding window log: at most `count` calls in ANY span of `interval`. Each call is a member (its
-- id) scored by the Redis time it goes ahead at; it leaves the window `interval` after that.
-- A call is placed at the earliest time >= now and >= the newest entry (so a later caller is
-- never placed before an earlier one: FIFO) at which the interval ending there holds fewer
-- than `count` entries. Placed later than now, it is a RESERVATION: the caller sleeps until
-- then, within its wait, and goes ahead with no second attempt.
-- KEYS[1] zset of calls (score: Redis time in µs, in the future for a reserved call)
-- ARGV[1] count, ARGV[2] interval (µs), ARGV[3] longest wait (µs), ARGV[4] the call's id
-- Returns {1, calls left at the slot, slot, µs until the slot} when the call got a place, else
-- {0, µs until the next place}; times are Redis time in µs.

-- The arguments by name (their slots are listed above).
local count, interval, max_wait = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local call_id = ARGV[4]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- Calls that went ahead at or before now - interval are out of the window (now - interval, now].
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - interval)
local used = redis.call('ZCARD', KEYS[1])
local slot = now
if used > 0 then
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  slot = math.max(slot, tonumber(newest[2]))
end
if used >= count then
  -- The entry that must leave before one more fits (there are `used - count + 1` too many).
  local nth = redis.call('ZRANGE', KEYS[1], used - count, used - count, 'WITHSCORES')
  slot = math.max(slot, tonumber(nth[2]) + interval)
end
local wait = slot - now
if wait > max_wait then
  return {0, wait}
end
-- Entries in (slot - interval, slot] before this one: all of them unless some have left by then.
local before = used
if wait > 0 then
  before = redis.call('ZCOUNT', KEYS[1], string.format('(%.0f', slot - interval), '+inf')
end
redis.call('ZADD', KEYS[1], slot, call_id)
redis.call('PEXPIRE', KEYS[1], math.ceil((slot + interval - now) / 1000))
return {1, count - before - 1, slot, wait}
