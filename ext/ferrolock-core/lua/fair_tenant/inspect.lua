-- Admin's read of a (job class, tenant)'s counters (src/fair_tenant/inspect.rs); read-only.
-- KEYS[1] its key (exact: the sorted set of exact.lua; bounded: the hash of bounded.lua);
-- ARGV[1] 'exact' or 'bounded', ARGV[2..] the rules' windows (ms).
-- Returns {now ms, then per window: exact, the enqueues within it (scores are whole ms: "within
-- per" is score >= now - per + 1); bounded, its bucket number, current and previous counts
-- (false: none)}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
for i = 2, #ARGV do
  local per = ARGV[i]
  if ARGV[1] == 'exact' then
    out[#out + 1] = redis.call('ZCOUNT', KEYS[1], now - tonumber(per) + 1, '+inf')
  else
    local stored = redis.call('HMGET', KEYS[1], 'b' .. per, 'c' .. per, 'p' .. per)
    out[#out + 1] = stored[1] or false
    out[#out + 1] = stored[2] or false
    out[#out + 1] = stored[3] or false
  end
end
return out
