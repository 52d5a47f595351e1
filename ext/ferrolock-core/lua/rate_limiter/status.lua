-- A rate limiter's state, read-only: calls it would let through now and the time until it is
-- back to its full count if no call comes (reserved calls count as calls to come).
-- KEYS[1] the limiter's key (see window.lua, sliding_window.lua, gcra.lua)
-- ARGV[1] kind ('window', 'sliding_window' or 'gcra'), ARGV[2] count, ARGV[3] interval (µs),
-- ARGV[4] emission (µs, gcra), ARGV[5] tolerance (µs, gcra)
-- Returns {remaining, µs until full}.

-- The arguments by name (their slots are listed above).
local kind, count, interval = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local emission, tolerance = tonumber(ARGV[4]), tonumber(ARGV[5])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

if kind == 'window' then
  local window = math.floor(now / interval)
  local stored = redis.call('HMGET', KEYS[1], 'w', 'n')
  local latest, used = tonumber(stored[1]), tonumber(stored[2])
  -- Every window before the latest one is full (see window.lua): if a refund emptied the
  -- latest, the one before it is the last with calls.
  if latest and used <= 0 then
    latest, used = latest - 1, count
  end
  if not latest or latest < window then
    return {count, 0}
  end
  local left = 0
  if latest == window then
    left = math.max(0, count - used)
  end
  return {left, (latest + 1) * interval - now}
end

if kind == 'sliding_window' then
  -- Formatted by hand: Lua's own number formatting rounds to 14 digits.
  local live = redis.call('ZCOUNT', KEYS[1], string.format('(%.0f', now - interval), '+inf')
  if live == 0 then
    return {count, 0}
  end
  local newest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
  local left = math.max(0, count - live)
  -- A reserved call goes ahead later: a call now would be placed after it.
  if newest > now then
    left = 0
  end
  return {left, math.max(0, newest + interval - now)}
end

local tat = math.max(now, tonumber(redis.call('HGET', KEYS[1], 't')) or now)
local remaining = math.floor((now + tolerance - tat) / emission + 1e-9) + 1
return {math.max(0, remaining), math.ceil(tat - now)}
