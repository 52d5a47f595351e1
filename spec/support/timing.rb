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
