# frozen_string_literal: true

module FerrolockTest
  # Clock helpers for specs that bound how long something takes.
  module Timing
    def monotonic
      Ferrolock.monotonic
    end

    # Seconds spent running the block.
    def elapsed
      started = monotonic
      yield
      monotonic - started
    end

    # How often the lateness probe wakes (seconds).
    PROBE_TICK = 0.005

    # [seconds the block took, how late this process's threads were woken meanwhile]: the sum of
    # what a probe thread's PROBE_TICK sleeps overslept. On a loaded machine every interval
    # measured with this process's clock grows by about that much, so a bound on one adds it
    # (see #late_bound) instead of failing on a busy machine; on a quiet one it is a few ms.
    def elapsed_and_lateness(&block)
      lateness = 0.0
      running = true
      probe = Thread.new do
        while running
          started = monotonic
          sleep PROBE_TICK
          lateness += [monotonic - started - PROBE_TICK, 0].max
        end
      end
      took = elapsed(&block)
      running = false
      probe.join
      [took, lateness]
    end

    # An upper bound for an interval that takes `seconds` on a quiet machine, measured while the
    # process was `lateness` seconds late (elapsed_and_lateness): twice that is added, as the
    # measured threads and the probe are not late at the same moments.
    def late_bound(seconds, lateness)
      seconds + (2 * lateness)
    end

    # Polls the block until it returns truthy; fails after timeout seconds, naming `what` (a
    # String, or a Proc called then, to describe the state it found).
    def wait_until(timeout: 5, interval: 0.01, what: "condition")
      deadline = monotonic + timeout
      until (result = yield)
        raise "#{what.respond_to?(:call) ? what.call : what} not met within #{timeout}s" if monotonic > deadline

        sleep interval
      end
      result
    end
  end
end
