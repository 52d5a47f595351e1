-- The watchdog's look at whether Redis kept ferrolock's data (data_loss.rs): the namespace's
-- epoch, created with a random value when missing and kept alive while some process probes, and
-- the server's run_id and evicted_keys.
-- KEYS[1] epoch key; ARGV[1] a fresh random epoch (used only when the key is missing),
-- ARGV[2] the epoch's TTL (ms). Returns {epoch, run_id, evicted_keys}.

-- The arguments by name (their slots are listed above).
local fresh = ARGV[1]
local ttl_ms = ARGV[2]

local epoch = redis.call('GET', KEYS[1])
if not epoch then
  epoch = fresh
  redis.call('SET', KEYS[1], epoch, 'PX', ttl_ms)
else
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
end
-- INFO after the writes: a script's writes may not follow a non-deterministic command on old
-- servers without effects replication.
local server = redis.call('INFO', 'server')
local stats = redis.call('INFO', 'stats')
local run_id = string.match(server, 'run_id:(%x+)') or ''
local evicted = tonumber(string.match(stats, 'evicted_keys:(%d+)') or '0')
return {tonumber(epoch) or 0, run_id, evicted}
