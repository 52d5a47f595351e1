# frozen_string_literal: true

module Ferrolock
  # The one backoff curve of every job ferrolock pushes back for later rather than drop: Sidekiq's
  # reschedules (LimiterMiddleware, DualLockMiddleware, uniqueness' on_conflict: :reschedule) and
  # ActiveJob's (dual_lock, concurrency rules). The n-th time: 2**(n - 1) seconds (1, 2, 4 …), capped
  # at MAX, plus up to JITTER of that at random, so jobs pushed back together do not come back in
  # lockstep.
  module Backoff
    MAX = 300
    JITTER = 0.5

    module_function

    # Seconds before the count-th comeback (a count below 1 counts as 1).
    def delay(count)
      base = [2**([count.to_i, 1].max - 1), MAX].min.to_f
      base + (rand * base * JITTER)
    end

    # What a backoff proc answered (the block calls it), when Validate.delay accepts it; else
    # the curve's, after passing `warn` the reason (a broken proc must not turn a delay into a lost
    # job). Without a proc: the curve's.
    def answered(count, backoff_proc, warn)
      return delay(count) unless backoff_proc

      seconds = yield
      Validate.delay(seconds) || begin
        warn.call("backoff returned #{Validate.show(seconds)}; using the default backoff")
        delay(count)
      end
    end
  end
end
