# frozen_string_literal: true

module Ferrolock
  module Testing
    # The fake backends' state: one Hash per table, all behind one lock, so reset! clears it at
    # once. A thread that waits (for a lock, a slot, its turn) sleeps on one condition variable
    # that every change broadcasts, for at most its deadline or the next expiry it knows of.
    class Store
      def initialize
        @lock = ::Mutex.new
        @changed = ::ConditionVariable.new
        @tables = {}
      end

      def synchronize(&block)
        @lock.synchronize(&block)
      end

      # One table's Hash (inside synchronize).
      def table(name)
        @tables[name] ||= {}
      end

      # Wakes every waiter to look again (inside synchronize).
      def changed!
        @changed.broadcast
      end

      def reset!
        @lock.synchronize do
          @tables = {}
          @changed.broadcast
        end
      end

      # Inside synchronize: yields until the block's first value is truthy (returned), or nil once
      # the deadline (Ferrolock.monotonic seconds; nil: none) passed. The block's second value is a
      # Testing.now time at which the state changes by itself (an expiry), or nil. A newly queued
      # asynchronous exception (Thread#raise, Timeout) ends the wait with Native::Interrupted, as
      # a native wait ends (see Interrupts).
      def await(deadline)
        pending = Thread.pending_interrupt?
        loop do
          value, wakes_at = yield
          return value if value

          timeout = wait_for(deadline, wakes_at)
          return nil if timeout&.<=(0)

          @changed.wait(@lock, timeout)
          raise Native::Interrupted if !pending && Thread.pending_interrupt?
        end
      end

      private

      # Seconds to sleep: until the deadline or the next expiry, whichever comes first (nil: until woken).
      def wait_for(deadline, wakes_at)
        left = deadline && (deadline - Ferrolock.monotonic)
        return left if left&.<=(0)

        expiry = wakes_at && [wakes_at - Testing.now, 0.001].max
        [left, expiry].compact.min
      end
    end
  end
end
