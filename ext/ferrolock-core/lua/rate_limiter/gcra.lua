-- GCRA (the generic cell rate algorithm): one number per limiter, the theoretical arrival time
-- (TAT) of the next call if calls came exactly every `emission` µs. A call of cost c may go
-- ahead once now >= TAT + (c - 1) * emission - tolerance; it then moves TAT c emissions on.
-- leaky: tolerance = burst * emission (burst 0: calls at least `emission` apart).
-- bucket and points: tolerance = interval - emission, which is a token bucket of `count` tokens
-- refilled continuously (tokens now = count - (TAT - now) / emission); a points call spends c.
-- A call whose slot is later than now but within its wait RESERVES it here: TAT moves on as if
-- it had come at its slot, so the next caller's slot is after it (FIFO by construction) and the
-- caller only sleeps until its slot (no second attempt).
-- KEYS[1] hash {t = TAT (Redis time in µs, fractional), id = the id of the call that set it}
-- ARGV[1] emission interval (µs, interval / count), ARGV[2] tolerance (µs), ARGV[3] cost,
-- ARGV[4] longest wait (µs), ARGV[5] the call's id (for a refund, see refund.lua)
-- Returns {1, calls left at the slot, slot, µs until the slot} when the call got a slot, else
-- {0, µs until the next slot}; times are Redis time in µs.

-- The arguments by name (their slots are listed above).
local emission, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local cost, max_wait = tonumber(ARGV[3]), tonumber(ARGV[4])
local call_id = ARGV[5]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local tat = tonumber(redis.call('HGET', KEYS[1], 't')) or now
if tat < now then
  tat = now
end
local next_tat = tat + cost * emission
-- Half a microsecond of slack absorbs floating-point rounding (e.g. a full burst of `count`).
local wait = math.max(0, math.ceil(next_tat - emission - tolerance - 0.5 - now))
if wait > max_wait then
  return {0, wait}
end
-- %.17g: the exact double back from tonumber (Lua's own formatting keeps 14 digits).
redis.call('HSET', KEYS[1], 't', string.format('%.17g', next_tat), 'id', call_id)
-- Once TAT has passed, a missing key means the same (an idle limiter): let it expire then.
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((next_tat - now) / 1000)))
local slot = now + wait
return {1, math.max(0, math.floor((slot + tolerance - next_tat) / emission + 1e-9) + 1), slot, wait}
