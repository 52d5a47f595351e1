-- Counts live slots and waiting callers; read-only (expired entries are skipped, not removed).
-- KEYS[1] slots, KEYS[2] waiters. Returns {in_use, waiting}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = '(' .. now
return {redis.call('ZCOUNT', KEYS[1], live, '+inf'), redis.call('ZCOUNT', KEYS[2], live, '+inf')}
