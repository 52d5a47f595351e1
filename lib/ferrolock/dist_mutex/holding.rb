# frozen_string_literal: true

module Ferrolock
  class DistMutex
    # A DistMutex's record of which fiber holds it (Owners) kept in step with its Redis holds:
    # a hold is recorded when granted and taken out before it is released, and a wait starts only
    # after the local owners were checked (Ruby Mutex's ThreadErrors instead of a hang).
    module Holding
      private

      # Takes the calling fiber's hold out of the registry and releases it; false when it held
      # none. Call it with interrupts deferred (Interrupts.release): no exception may land between
      # the two.
      def release_own_hold
        ownership = Owners.take_current(@native, @key)
        return false unless ownership

        released(ownership) if unlock_counted(ownership.hold) == :all
        true
      rescue LockLost
        Ferrolock.instrument(:lock_lost, primitive: :dist_mutex, name: @name, detected: :release)
        raise
      end

      # DistMutex#sleep's release and wait, one native call (true when woken); its release counted or
      # evented as release_own_hold's, its hold ending at started (when the sleep began).
      def release_and_sleep(ownership, timeout, deferred, started)
        audience = Ferrolock.audience(:released) if @auto_release
        woken = @native.release_and_sleep(ownership.hold, timeout, deferred, @history.tally_when(audience))
        released(ownership, started) if audience == :all
        woken
      end

      # Interrupts' give-back of a hold granted as an exception landed (it was never recorded): released
      # and counted as release_own_hold does (the core counted its :acquired when History alone listens).
      def give_back(hold)
        unlock_counted(hold)
      end

      # The native release of hold; returns the audience of :released. History alone listens: the core
      # counts the release and its hold in the tally. Not counted for auto_release: false, whose lock
      # is freed by its expiry.
      def unlock_counted(hold)
        audience = Ferrolock.audience(:released) if @auto_release
        @native.unlock(hold, @history.tally_when(audience))
        audience
      end

      # release_own_hold at the end of synchronize's block (finished: it did not raise).
      def release_after_block(finished)
        release_own_hold
      rescue LockLost
        raise if finished
      rescue Error => e
        ReleaseFailure.report(e, what: "DistMutex #{@name.inspect}", finished: finished,
                                 primitive: :dist_mutex, name: @name)
      end

      # Records hold (a Native::MutexHold) as owned by the calling fiber, from now.
      def remember(hold)
        ownership = Ownership.new(@native, hold, @key, @name, Thread.current, Fiber.current, @tick,
                                  Ferrolock.monotonic)
        Owners.add(ownership)
        @granted = ownership # (lock_as_current's :acquired reads its since)
      end

      # Takes the calling fiber's Ownership out of the registry (ThreadError when it holds none).
      def take_own_hold!
        Owners.take_current(@native, @key) ||
          raise(ThreadError, "Attempt to unlock a mutex which is not locked by this thread")
      end

      # :released with :held, the seconds from ownership's grant to ended (Ferrolock.monotonic; now
      # when nil), for a subscriber or a Notifications listener (audience :all).
      def released(ownership, ended = nil)
        ended ||= Process.clock_gettime(Process::CLOCK_MONOTONIC) # Ferrolock.monotonic's clock, a call less
        Ferrolock.instrument(:released, { primitive: :dist_mutex, name: @name, held: ended - ownership.since })
      end

      # Before waiting: fails like Ruby's Mutex when the calling fiber holds the lock, or a live
      # sibling fiber does (it could never run to unlock: the wait blocks the thread, even under a
      # Fiber.scheduler), instead of hanging. A hold whose owner ended is released now rather than
      # at the reaper's next tick.
      def check_local_owners
        case (gone = Owners.before_lock(@native, @key))
        when :owned then raise ThreadError, "deadlock; recursive locking"
        when :sibling
          raise ThreadError, "deadlock; lock already owned by another fiber belonging to the same thread"
        else Reaper.release_all(gone)
        end
      end
    end
  end
end
