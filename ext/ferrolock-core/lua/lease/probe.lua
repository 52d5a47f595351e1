-- The watchdog's look at which server answers and what it evicted (data_loss.rs). It reads and
-- writes no key: KEYS[1] only routes it (on a Cluster, to the node of the namespace's slot).
-- Returns {run_id, evicted_keys, uptime_in_seconds}.

local server = redis.call('INFO', 'server')
local stats = redis.call('INFO', 'stats')
local run_id = string.match(server, 'run_id:(%x+)') or ''
local evicted = tonumber(string.match(stats, 'evicted_keys:(%d+)') or '0')
local uptime = tonumber(string.match(server, 'uptime_in_seconds:(%d+)') or '0')
return {run_id, evicted, uptime}
