# frozen_string_literal: true

module Ferrolock
  # "Acquire until a deadline", the Ruby half (the binding's: ext/ferrolock/src/wait_timeout.rs,
  # the core's: ext/ferrolock-core/src/wait_timeout.rs). `wait_timeout` is the one name of the wait
  # from the Ruby API to the core. The core owns stall handling: a call whose Redis stalls is cut
  # at its deadline + 0.25 s and, once the wait_timeout has run out, raised as Stalled. Here it
  # becomes the primitive's own timeout error (TimeoutError, OverLimit), which is what callers
  # handle; the Stalled is its `cause`. A connection error before the deadline stays a
  # ConnectionError, and a ReplicationError (too few replicas acknowledged) is never a stall.
  module WaitTimeout
    # Redis did not answer before the caller's wait_timeout ran out (raised by the binding; its
    # message names host:port, as every ConnectionError's).
    class Stalled < ConnectionError; end

    module_function

    # The native acquisition (the block) made as Interrupts.acquire makes it; when Redis stalled
    # past the wait_timeout, the exception `timed_out.call(*context)` builds is raised instead (a
    # hot path can pass a callable made once and this call's values, and make no closure per call).
    def acquire(timed_out, *context, keep:, give_back:, &native)
      Interrupts.acquire(keep: keep, give_back: give_back, &native)
    rescue Stalled
      raise timed_out.call(*context)
    end

    # Yields (native calls that run until a deadline, not acquisitions themselves: DualLock's wait
    # for its turn); a stall past the wait_timeout raises what `timed_out.call(*context)` builds instead.
    def within(timed_out, *context)
      yield
    rescue Stalled
      raise timed_out.call(*context)
    end
  end
end
