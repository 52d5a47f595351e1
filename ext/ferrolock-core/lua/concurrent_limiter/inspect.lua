-- Admin's read of a ConcurrentLimiter (src/concurrent_limiter/inspect.rs); read-only. KEYS[1]
-- slots, KEYS[2] line, KEYS[3] the operators' override. Returns {now ms, live slots as
-- [token, expiry ms, ...], the '{limit}' member's score (-limit; acquire.lua) or false, live
-- waiters, override limit or false, override paused or false}.
local now = now_ms()
local slots = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
local over = redis.call('HMGET', KEYS[3], 'limit', 'paused')
return {now, slots, redis.call('ZSCORE', KEYS[1], '{limit}'), live_in_line(KEYS[2], now), over[1], over[2]}
