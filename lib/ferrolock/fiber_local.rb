# frozen_string_literal: true

module Ferrolock
  # A value this fiber sees while a block runs (Thread#[] is fiber-local), the outer one back
  # after it: how the Sidekiq, ActiveJob and Shoryuken integrations tell the code a job runs
  # (or enqueues) which job that is.
  module FiberLocal
    module_function

    # Runs the block with Thread.current[key] set to `value`; returns the block's value.
    def with(key, value)
      outer = Thread.current[key]
      Thread.current[key] = value
      yield
    ensure
      Thread.current[key] = outer
    end
  end
end
