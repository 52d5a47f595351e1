-- Admin's read of a rate limiter's key (src/rate_limiter/inspect.rs); read-only.
-- KEYS[1] the limiter's key; ARGV[1] its script family ('window', 'sliding_window' or 'gcra').
-- Returns {PTTL} when the key is gone, else {PTTL, now µs, the sliding window's calls after now
-- or false, the fixed window's latest window and its count (window.lua) or false, false, the
-- arrival time (gcra.lua) or false}.
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 then
  return {pttl}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local kind = ARGV[1]
if kind == 'sliding_window' then
  return {pttl, now, redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'), false, false, false}
elseif kind == 'window' then
  local stored = redis.call('HMGET', KEYS[1], 'w', 'n')
  return {pttl, now, false, stored[1], stored[2], false}
end
return {pttl, now, false, false, false, redis.call('HGET', KEYS[1], 't')}
