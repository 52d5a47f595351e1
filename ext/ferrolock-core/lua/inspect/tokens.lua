-- Admin's read of token keys (src/inspect.rs `tokens`): for each key, its value (false: none)
-- and PTTL. Read-only.
local out = {}
for i, key in ipairs(KEYS) do
  out[2 * i - 1] = redis.call('GET', key)
  out[2 * i] = redis.call('PTTL', key)
end
return out
