# frozen_string_literal: true

module Ferrolock
  class DistMutex
    # Releases DistMutex holds whose owner thread or fiber ended without unlocking (Ruby's Mutex
    # frees a dead thread's locks; a DistMutex would otherwise stay held, and renewed, until the
    # process exits). One Ruby thread per process, started with the first hold; it looks every
    # tick (lease/3, the renewal period) while something is held and sleeps otherwise.
    module Reaper
      @lock = ::Mutex.new
      @wake = ::ConditionVariable.new
      @pid = nil
      @thread = nil
      @wakes_at = nil # monotonic time of the next look; nil: sleeping until nudged

      class << self
        # Called after a hold is recorded: makes sure the reaper looks within tick seconds.
        def nudge(tick)
          @lock.synchronize do
            start unless @pid == Process.pid && @thread&.alive?
            due = Ferrolock.monotonic + tick
            @wake.signal if @wakes_at.nil? || due < @wakes_at
          end
        end

        # Releases holds taken from Owners (their owner ended), reporting each.
        def release_all(ownerships)
          ownerships.each { |ownership| release(ownership) }
        end

        private

        # A fresh thread in a new process (a forked child has none: the parent's is not copied).
        def start
          @pid = Process.pid
          @wake = ::ConditionVariable.new
          @wakes_at = Ferrolock.monotonic # the new thread computes its first wait itself
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
            tick = Owners.shortest_tick
            @wakes_at = tick && (Ferrolock.monotonic + tick)
            @wake.wait(@lock, tick)
            @wakes_at = Ferrolock.monotonic # busy: nudges need not signal until the next wait
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
          # DistMutex#lock runs this too, on the caller's thread: its Timeout.timeout must fire
          # (the hold is out of Owners already and expires after its lease).
          raise
        rescue StandardError => e
          Ferrolock.logger.warn("ferrolock: releasing DistMutex #{ownership.key.last.inspect} of an ended owner " \
                                "failed (it expires after its lease): #{e.class}: #{e.message}")
        end

        def report(ownership, lost)
          name = ownership.key.last
          thread = ownership.thread
          owner = thread.alive? ? "a fiber of #{thread.inspect}" : thread.inspect
          Ferrolock.logger.warn("ferrolock: DistMutex #{name.inspect} released: " \
                                "its owner #{owner} ended without unlocking")
          Ferrolock.instrument(:owner_gone, primitive: :dist_mutex, name: name, lost: lost)
        end
      end
    end
  end
end
