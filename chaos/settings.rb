# frozen_string_literal: true

module Chaos
  # What every worker process uses, in one place so the checker derives its bounds from the
  # same numbers the workloads ran with.
  module Settings
    LEASE = 1.5             # mutex lease, limiter lock_timeout, DualLock wait_ttl/exec_ttl (s)
    CONNECT_TIMEOUT = 0.5   # Ferrolock::Client connect_timeout (s)
    READ_TIMEOUT = 0.5      # Ferrolock::Client read_timeout (s)
    LOCK_TIMEOUT = 1.0      # DistMutex#lock(timeout:)
    WAIT_TIMEOUT = 1.0      # ConcurrentLimiter#within_limit(wait_timeout:)
    MAX_WAIT = 2.0          # DualLock max_wait
    LIMIT = 3               # ConcurrentLimiter count
    MUTEX_NAMES = %w[m0 m1].freeze
    LIMITER_NAME = "lim"
    DUAL_KEYS = %w[d0 d1].freeze
    LONG_ONE_IN = 25        # one section in 25 outlives the lease (1.2-2.2 leases)
    JOB_ATTEMPTS = 5        # a DualLock job that raised is "rescheduled" this many times, then reported
    # ... after this pause: longer than a lease, as Sidekiq's retry backoff is, so the wait lock
    # its failed attempt may have left (Redis was unreachable to release it) has expired.
    RETRY_AFTER = LEASE * 1.2
    # A wait may end later than its deadline by one connect plus one read (the call in flight when
    # the deadline passes may find Redis stopped or restarting) plus scheduling slack on a loaded VM.
    SLACK = 0.5
    WAIT_TOLERANCE = CONNECT_TIMEOUT + READ_TIMEOUT + SLACK
  end
end
