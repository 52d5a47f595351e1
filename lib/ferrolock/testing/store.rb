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

      # DistMutex#sleep's release and wait as one step, so that no wake-up falls between them: the
      # block (the release, inside the lock) says whether to wait; the thread then sleeps at most
      # timeout seconds (nil: until woken), letting the lock go as it sleeps (Mutex#sleep). Whoever
      # learns of the release (locked?, try_lock, lock) takes the lock after that, so finds this
      # thread asleep. The lock is taken spinning, never blocked: a thread blocked on it looks
      # asleep (Thread#stop?) while still holding what it is to release, and Ruby drops a wake-up
      # sent then. True when woken (or it did not wait), false when the timeout passed.
      def release_then_sleep(timeout)
        Thread.pass until @lock.try_lock
        begin
          return true unless yield

          Store.sleep_on(@lock, timeout)
        ensure
          @lock.unlock
        end
      end

      # lock.sleep(timeout) (held lock, nil: until woken): true when woken, false when the timeout
      # passed. Told by the clock: Mutex#sleep says "woken" when an exception the caller's mask
      # defers was queued, even once the whole timeout passed.
      def self.sleep_on(lock, timeout)
        return !lock.sleep.nil? if timeout.nil?

        deadline = Ferrolock.monotonic + timeout
        lock.sleep(timeout)
        Ferrolock.monotonic < deadline
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
