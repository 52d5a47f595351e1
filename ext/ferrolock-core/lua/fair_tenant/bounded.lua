-- Records one enqueue of a (job class, tenant) in fixed-size sliding-window counters and says
-- which rule it now breaks. Storage per tenant is one small hash with three fields per distinct
-- window (bucket number, count in that bucket, count in the bucket before), whatever the number
-- of enqueues. The count within a window is estimated as
--   current bucket + previous bucket * (part of the previous bucket still inside the window),
-- i.e. exact when enqueues are spread evenly over the previous bucket.
-- KEYS[1] hash
-- ARGV[1] 1 = record this enqueue, 0 = only evaluate (a re-push already counted),
-- ARGV[2] number of distinct windows w, then the w windows (ms, ascending: the longest last),
-- then the number of rules n, then n pairs: window number (1-based), threshold.
-- Returns the index (1-based) of the LAST rule whose estimated count exceeds its threshold, or 0.

-- The arguments by name (their slots are listed above; the windows and rules follow w).
local record = ARGV[1] == '1'
local w = tonumber(ARGV[2])
local rule_count = tonumber(ARGV[3 + w])

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

local fields = {}
for j = 1, w do
  local per = ARGV[2 + j]
  fields[3 * j - 2] = 'b' .. per
  fields[3 * j - 1] = 'c' .. per
  fields[3 * j] = 'p' .. per
end
local stored = redis.call('HMGET', KEYS[1], unpack(fields))

-- Only changed fields are written: usually one count per window.
local updates, estimates, u = {}, {}, 0
for j = 1, w do
  local per = tonumber(ARGV[2 + j])
  local bucket = math.floor(now / per)
  local at = tonumber(stored[3 * j - 2])
  local cur = tonumber(stored[3 * j - 1]) or 0
  local prev = tonumber(stored[3 * j]) or 0
  if at ~= bucket then
    -- The window moved on: the old current bucket is the previous one only if adjacent.
    if at == bucket - 1 then prev = cur else prev = 0 end
    cur = record and 1 or 0
    -- A missing window is created only by a record, which also sets the key's expiry.
    if record or at then
      updates[u + 1] = fields[3 * j - 2]
      updates[u + 2] = bucket
      updates[u + 3] = fields[3 * j - 1]
      updates[u + 4] = cur
      updates[u + 5] = fields[3 * j]
      updates[u + 6] = prev
      u = u + 6
    end
  elseif record then
    cur = cur + 1
    updates[u + 1] = fields[3 * j - 1]
    updates[u + 2] = cur
    u = u + 2
  end
  estimates[j] = cur + prev * (per - now % per) / per
end
if u > 0 then
  redis.call('HSET', KEYS[1], unpack(updates))
end
if record then
  -- A bucket still weighs in for one window after it ends.
  redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[2 + w]))
end

local base = 3 + w
for i = rule_count, 1, -1 do
  if estimates[tonumber(ARGV[base + 2 * i - 1])] > tonumber(ARGV[base + 2 * i]) then
    return i
  end
end
return 0
