-- Shared by the Admin reads (src/inspect.rs): Redis time in ms, and the live waiters of a line
-- (a list of "token|deadline ms", "|@inbox" after it for a waiter granted through its grant
-- inbox) among its first 1,000. An entry past its deadline is a waiter that gave up or died
-- (the release skips it too); one without a deadline counts. A key of another type is no line
-- (an older version's sorted set): 0.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function live_in_line(key, now)
  if redis.call('TYPE', key).ok ~= 'list' then
    return 0
  end
  local live = 0
  for _, entry in ipairs(redis.call('LRANGE', key, 0, 999)) do
    local deadline = string.match(entry, '|(%d+)$') or string.match(entry, '|(%d+)|@[%w_]+$')
    if deadline == nil or tonumber(deadline) > now then
      live = live + 1
    end
  end
  return live
end
