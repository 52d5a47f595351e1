# frozen_string_literal: true

module Ferrolock
  # A wait with a timeout ends by it even when Redis stalls (ext/ferrolock-core/src/
  # caller_deadline.rs): every read is cut at the deadline + 0.25 s, raising ConnectionError. When
  # the caller's time had run out by then, the primitive raises its own timeout error instead
  # (TimeoutError, OverLimit), which is what callers handle; the ConnectionError is its `cause`.
  # A ReplicationError (too few replicas acknowledged) is not a stall and is raised as it is.
  module CallerTimeout
    module_function

    # Yields; a ConnectionError raised after `timeout` seconds since `started` (monotonic) is
    # replaced by the block `timed_out`'s exception (raised here, so `cause` is the original).
    def bound(started, timeout, timed_out)
      yield
    rescue ConnectionError => e
      raise if e.is_a?(ReplicationError) || nil.equal?(timeout) || Ferrolock.monotonic - started < timeout

      raise timed_out.call
    end
  end
end
