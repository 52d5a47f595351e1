# frozen_string_literal: true

module Ferrolock
  class DistMutex
    # Releases DistMutex holds whose owner thread or fiber ended without unlocking (Ruby's Mutex
    # frees a dead thread's locks; a DistMutex would otherwise stay held, and renewed, until the
    # process exits). One Ruby thread per process, started with the first hold; it looks every
    # tick (lease/3, the renewal period, at most LONGEST_TICK) while something is held, goes on
    # for IDLE_TICKS ticks after that and then sleeps until nudged. So a process that keeps taking
    # and releasing locks never signals it: a nudge wakes the thread only when it would otherwise
    # look too late.
    module Reaper
      # Ticks the thread keeps looking with nothing held before it sleeps until nudged.
      IDLE_TICKS = 3
      # Seconds: other processes see a dead thread's lock free within about this long, not after
      # lease/3 (10 s by default). Calls of this process release it first (DistMutex#locked?,
      # #try_lock, #lock). A look costs one wake-up and an alive? per hold.
      LONGEST_TICK = 0.5
      @lock = ::Mutex.new
      @wake = ::ConditionVariable.new
      @generation = nil # Native.fork_generation of the process the thread runs in
      @thread = nil
      @wakes_at = nil # monotonic time of the next look; nil: busy, or sleeping until nudged
      @tick = nil # the last tick used, kept for the idle ticks
      @idle_ticks = 0

      class << self
        # Called after a hold is recorded (at now, Ferrolock.monotonic): makes sure the reaper
        # looks within tick seconds.
        # Without @lock when the thread runs here and will look soon enough by itself: @wakes_at
        # is set under @lock just before each wait and cleared as the wait ends, so a time read
        # here is one the thread is waiting for, or one whose wait just ended: its next look then
        # computes the tick under @lock, after this hold was recorded.
        def nudge(tick, now)
          return if looks_in_time?(@wakes_at, tick, now)

          @lock.synchronize do
            start unless running?
            @idle_ticks = 0
            # Kept for the idle ticks even if the hold has ended when the thread next looks.
            @tick = tick if @tick.nil? || tick < @tick
            @wake.signal unless looks_in_time?(@wakes_at, tick, Ferrolock.monotonic)
          end
        end

        # Releases key's holds whose owner ended (usually none: one hash lookup), before a call
        # of this process looks at the lock, so that none sees a dead thread's lock held.
        def release_ended(key)
          release_all(Owners.take_gone(key))
        end

        # Releases holds taken from Owners (their owner ended), reporting each. Every one is
        # released, whatever exception lands meanwhile (it is raised once they are): Owners
        # announced their releases, and this process's locked? waits until each is answered.
        def release_all(ownerships)
          return if ownerships.empty?

          Interrupts.release { ownerships.each { |ownership| release(ownership) } }
        end

        private

        # True when the thread runs in this process and looks again by itself within tick seconds.
        def looks_in_time?(wakes_at, tick, now)
          !wakes_at.nil? && now + tick >= wakes_at && running?
        end

        def running?
          @generation == Native.fork_generation && @thread&.alive?
        end

        # A fresh thread in a new process (a forked child has none: the parent's is not copied).
        def start
          @generation = Native.fork_generation
          @wake = ::ConditionVariable.new
          @wakes_at = nil # the new thread computes its first wait itself
          @thread = Thread.new do
            Thread.current.report_on_exception = false
            # A new thread inherits its creator's interrupt mask, and the first hold may be
            # recorded under Thread.handle_interrupt(Object => :never): unmask, or exit could
            # never end this thread.
            Thread.handle_interrupt(Object => :immediate) { run }
          end
          @thread.name = "ferrolock-reaper"
        end

        def run
          loop do
            wait_a_tick
            release_all(Owners.take_gone)
          end
        end

        # The tick is computed under @lock, so a nudge for a newer hold either counts in it or
        # arrives while waiting: never lost.
        def wait_a_tick
          @lock.synchronize do
            tick = next_tick
            @wakes_at = tick && (Ferrolock.monotonic + tick)
            @wake.wait(@lock, tick)
            @wakes_at = nil # busy: nudges take @lock until the next wait is computed
          end
        end

        # The shortest tick among holds; with none, the last one again for IDLE_TICKS ticks (a
        # process locking again meanwhile never signals), then nil (sleep until nudged).
        def next_tick
          tick = Owners.shortest_tick
          if tick
            @idle_ticks = 0
            @tick = tick
          elsif @tick && (@idle_ticks += 1) <= IDLE_TICKS
            @tick
          end
        end

        # The same token-checked release as unlock; the lease may have been lost meanwhile.
        def release(ownership)
          lost = false
          begin
            ownership.native_mutex.unlock(ownership.hold)
          rescue LockLost
            lost = true
          end
          report(ownership, lost)
        rescue ForeignError
          # A timeout is the caller's (release_all runs on its thread too), not a failed release.
          raise
        rescue StandardError => e
          Ferrolock.log(:warn, "ferrolock: releasing DistMutex #{ownership.name.inspect} of an ended owner " \
                               "failed (it expires after its lease): #{e.class}: #{e.message}")
        end

        # :owner_gone; and :released with :held (from the grant to this release, as an unlock's) when
        # the release found the lock still the owner's.
        def report(ownership, lost)
          name = ownership.name
          thread = ownership.thread
          owner = thread.alive? ? "a fiber of #{thread.inspect}" : thread.inspect
          Ferrolock.log(:warn, "ferrolock: DistMutex #{name.inspect} released: " \
                               "its owner #{owner} ended without unlocking")
          Ferrolock.instrument(:owner_gone, primitive: :dist_mutex, name: name, lost: lost)
          return if lost

          Ferrolock.instrument(:released, primitive: :dist_mutex, name: name, owner_gone: true,
                                          held: Ferrolock.monotonic - ownership.since)
        end
      end
    end
  end
end
