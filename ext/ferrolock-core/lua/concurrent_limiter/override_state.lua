-- Shared by concurrent_limiter/{override,override_read}.lua and job_concurrency/{override,admit,release}.lua
-- (declared with this file in front of them: Lua scripts cannot require): the operators' override
-- of a limit, live. A hash: 'limit' (another limit), 'paused' ('1': no slot is taken or handed on)
-- and 'ttl' (ms: it expires only after that long unread; every reader in force refreshes it, so it
-- survives restarts until cleared). concurrent_limiter/acquire.lua and release.lua read the same
-- fields in their own lines.

-- Applies `action` to the override at `key`: 'set_limit' (to `limit`), 'pause', 'resume' (a limit
-- set stays) or 'clear' (gone: the code's limit, resumed); it then lives `ttl_ms`.
local function write_override(key, action, limit, ttl_ms)
  if action == 'clear' then
    redis.call('DEL', key)
  elseif action == 'resume' then
    redis.call('HDEL', key, 'paused')
    if redis.call('HEXISTS', key, 'limit') == 0 then
      redis.call('DEL', key)
    end
  elseif action == 'pause' then
    redis.call('HSET', key, 'paused', '1', 'ttl', ttl_ms)
    redis.call('PEXPIRE', key, ttl_ms)
  elseif action == 'set_limit' then
    redis.call('HSET', key, 'limit', limit, 'ttl', ttl_ms)
    redis.call('PEXPIRE', key, ttl_ms)
  else
    return redis.error_reply('ERR unknown override action ' .. tostring(action))
  end
end

-- {limit or false, 1 paused / 0}: the override at `key` now.
local function override_reply(key)
  local state = redis.call('HMGET', key, 'limit', 'paused')
  return {state[1] or false, state[2] == '1' and 1 or 0}
end

-- The step both override scripts (concurrent_limiter/override.lua, job_concurrency/override.lua)
-- begin with: ARGV[1] the action, ARGV[2] its limit (set_limit), ARGV[3] the TTL (ms), as
-- OverrideAction::args sends them, applied to the override at `key`. Returns the reply
-- {limit or false, 1 paused / 0} now in force, or an error reply (`.err`) for an unknown action.
local function apply_override(key)
  return write_override(key, ARGV[1], ARGV[2], ARGV[3]) or override_reply(key)
end

-- The limit in force for a caller whose code says `configured`: 0 while paused, else the
-- override's limit, else `configured`; and whether paused. An override read here stays (its TTL
-- is refreshed).
local function limit_in_force(key, configured)
  local state = redis.call('HMGET', key, 'limit', 'paused', 'ttl')
  if state[3] then
    redis.call('PEXPIRE', key, state[3])
  end
  if state[2] == '1' then
    return 0, true
  end
  if state[1] then
    return tonumber(state[1]), false
  end
  return configured, false
end
