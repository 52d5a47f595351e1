-- Admin's read of a DistMutex (src/dist_mutex/inspect.rs); read-only. KEYS[1] lock, KEYS[2]
-- fence, KEYS[3] waiters. Returns {token or false, the lock's PTTL, fence or false, live waiters}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]),
  live_in_line(KEYS[3], now_ms())}
