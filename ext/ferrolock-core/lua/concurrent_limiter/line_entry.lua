-- Shared by release.lua and override.lua (src/concurrent_limiter.rs and its limit_override.rs put
-- this file in front of them: Lua scripts cannot require): a waiter's entry in the line, and how a
-- waiter is told it may go on. The one place that knows the entry's format and the wake-up.

-- "token|deadline", or "token|deadline|@inbox" (a token never contains '|'): the waiter's token,
-- when its wait ends (ms of Redis time; 0 when unreadable) and its grant inbox (nil: it pops its
-- grant list).
local function parse(entry)
  local who, deadline, inbox = string.match(entry, '^(.*)|(%d+)|@(%w+)$')
  if not who then
    who, deadline = string.match(entry, '^(.*)|(%d+)$')
  end
  return who, tonumber(deadline or 0), inbox
end

-- Tells waiter `who` (its entry parsed) `value`: the expiry of a slot handed to it, or 0 (nothing
-- handed over: it attempts again at once, src/line/handoff.rs). An entry with an inbox is told by
-- PUBLISHing "who|value" to the inbox's channel (src/inbox.rs); refused (no channel rights) only
-- where the waiter could not subscribe either: it then finds the slot its own at its next attempt.
-- One without (an older version's waiter, or an ACL without channel rights) gets `value` pushed to
-- its grant list. `now`: Redis time (ms). False when that list is not on this node (a migrating
-- cluster slot): nothing was written.
local function tell(who, deadline, inbox, value, now, grant_prefix, inbox_prefix)
  if inbox then
    redis.pcall('PUBLISH', inbox_prefix .. inbox, who .. '|' .. string.format('%d', value))
    return true
  end
  local list = grant_prefix .. who
  local pushed = redis.pcall('RPUSH', list, string.format('%d', value))
  if type(pushed) == 'table' and pushed.err then
    return false
  end
  -- The waiter pops it within its wait (or removes it when it gives up): the TTL only catches
  -- a waiter that died.
  redis.call('PEXPIRE', list, deadline - now + 1000)
  return true
end
