-- Records one enqueue of a (job class, tenant) in fixed-size sliding-window counters and says
-- which rule it now breaks. Storage per tenant is one small hash with three fields per distinct
-- window (bucket number, count in that bucket, count in the bucket before), whatever the number
-- of enqueues. The count within a window is estimated as
--   current bucket + previous bucket * (part of the previous bucket still inside the window),
-- i.e. exact when enqueues are spread evenly over the previous bucket.
-- KEYS[1] hash
-- ARGV[1] 1 = record this enqueue, 0 = only evaluate (a re-push already counted),
-- ARGV[2] number of rules n, then n pairs: window (ms), threshold.
-- Returns the index (1-based) of the LAST rule whose estimated count exceeds its threshold, or 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local record = ARGV[1] == '1' and 1 or 0
local n = tonumber(ARGV[2])

-- Rules sharing a window share its counters (and count this enqueue once).
local windows, fields, seen, longest = {}, {}, {}, 0
for i = 1, n do
  local per = tonumber(ARGV[1 + 2 * i])
  if not seen[per] then
    seen[per] = true
    windows[#windows + 1] = per
    fields[#fields + 1] = 'b' .. per
    fields[#fields + 1] = 'c' .. per
    fields[#fields + 1] = 'p' .. per
  end
  if per > longest then longest = per end
end

local stored = redis.call('HMGET', KEYS[1], unpack(fields))
local updates, estimates = {}, {}
for w, per in ipairs(windows) do
  local bucket = math.floor(now / per)
  local at = tonumber(stored[3 * w - 2]) or bucket
  local cur = tonumber(stored[3 * w - 1]) or 0
  local prev = tonumber(stored[3 * w]) or 0
  if at ~= bucket then
    -- The window moved on: the old current bucket is the previous one only if adjacent.
    if at == bucket - 1 then prev = cur else prev = 0 end
    cur = 0
  end
  cur = cur + record
  if record == 1 or at ~= bucket then
    for _, v in ipairs({fields[3 * w - 2], bucket, fields[3 * w - 1], cur, fields[3 * w], prev}) do
      updates[#updates + 1] = v
    end
  end
  estimates[per] = cur + prev * (per - (now % per)) / per
end
if #updates > 0 then
  redis.call('HSET', KEYS[1], unpack(updates))
end
if record == 1 then
  -- A bucket still weighs in for one window after it ends.
  redis.call('PEXPIRE', KEYS[1], 2 * longest)
end

local result = 0
for i = 1, n do
  local per = tonumber(ARGV[1 + 2 * i])
  if estimates[per] > tonumber(ARGV[2 + 2 * i]) then result = i end
end
return result
