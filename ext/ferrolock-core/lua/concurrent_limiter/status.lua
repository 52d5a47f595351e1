-- Counts live slots and waiting callers; read-only (expired entries are skipped, not removed).
-- KEYS[1] slots, KEYS[2] line (list of "token|deadline ms", then "|@inbox" for a waiter granted
-- through its grant inbox). Returns {in_use, waiting}; waiting
-- counts the live entries among the first 1,000.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local waiting = 0
for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, 999)) do
  local deadline = tonumber(string.match(entry, '|(%d+)$') or string.match(entry, '|(%d+)|@%w+$') or 0)
  if deadline > now then
    waiting = waiting + 1
  end
end
return {redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'), waiting}
