-- Gives a slot back if the token still holds it, and wakes one waiter if anyone waits.
-- KEYS[1] slots, KEYS[2] waiters, KEYS[3] signal list; ARGV[1] token, ARGV[2] limit
-- Returns 1 released, 0 the token held no live slot (its lease was lost). ZREM removes a token at
-- most once, so releasing twice never frees two slots.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local released = redis.call('ZREM', KEYS[1], ARGV[1])
if released + expired == 0 then
  return released
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] then
  -- One signal per freed slot, at most `limit` pending; they live as long as the longest wait.
  redis.call('LPUSH', KEYS[3], '1')
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[2]) - 1)
  redis.call('PEXPIRE', KEYS[3], math.max(1, tonumber(last[2]) - now))
end
return released
