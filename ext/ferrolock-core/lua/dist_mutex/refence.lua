-- Unfair mode (src/line/release.rs, pass_unfairly): a holder whose cohort may pass no more keeps
-- the lock for its process, whose waiting thread takes it as the first holder of a new cohort.
-- Checks the token, renews the lease and issues a fresh fencing block by acquire.lua's rule, so
-- every token stays above each one issued before. The waiters' line is not touched.
-- KEYS[1] lock, KEYS[2] fencing counter
-- ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] fencing counter ttl (ms)
-- Returns the new block's first fencing token, or 0 when the lock is not this token's.
-- Commands: GET, PEXPIRE, TIME, SET (fence, GET), rarely a second SET.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function block(n)
  return n + (16 - n % 16) % 16
end
local fence = block(now_us)
local last = tonumber(redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[3], 'GET') or 0) or 0
if last >= fence then
  fence = block(last + 1)
  redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[3])
end
return fence
