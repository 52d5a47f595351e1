# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # Promotes blocked jobs whose slot holder died, and enqueues again a promoted job whose enqueue
    # was lost once its lease ran out: a key with such parked jobs is listed in one
    # index per namespace, scored by its earliest lease expiry. One thread per process reads that
    # index (one script call), visits the keys that are due and sleeps until the next entry is
    # due, at most `interval`. Releases and admissions of a key free and promote too, so this only
    # matters when every holder of a key died or stalled.
    class ExpiryTimer
      # Longest sleep: an entry added by another process is seen within it.
      DEFAULT_INTERVAL = 1.0
      # A claimed key is skipped by other processes' timers this long (it covers a visit cut short).
      RECHECK = 5.0

      class << self
        attr_writer :interval

        def interval
          @interval || DEFAULT_INTERVAL
        end

        # Starts this process's timer now. A timer otherwise starts with the process's first
        # limits_concurrency admission, so a job server that has admitted none (booted after its
        # keys' jobs were blocked, e.g. during a pause) would leave a resumed key's jobs parked until
        # some process admits one. The Railtie calls this when a Sidekiq, Shoryuken or Solid Queue
        # worker starts; an app without Rails calls it from its worker's boot.
        def start(client = Ferrolock.client)
          Slots.for(client).timer.ensure_started
        end
      end

      def initialize(slots)
        @slots = slots
        @lock = Mutex.new
        @wake = ConditionVariable.new
      end

      # Cheap when running: a pid comparison and an alive? check (a forked child starts its own).
      def ensure_started
        return if running?

        @lock.synchronize do
          next if running?

          @pid = Process.pid
          @thread = Thread.new { Thread.handle_interrupt(Object => :immediate) { run } }
          @thread.name = "ferrolock-concurrency-timer"
          @thread.report_on_exception = false
        end
        nil
      end

      # Makes the timer look at the index now (a job was just blocked here).
      def wake
        @lock.synchronize { @wake.signal }
      end

      def running?
        @pid == Process.pid && @thread&.alive?
      end

      # Ends the thread (its visit, if one runs, is cut short: the claim covers it).
      def stop
        thread = @thread
        return unless thread && @pid == Process.pid

        thread.kill
        thread.join(1)
        nil
      end

      private

      def run
        while Slots.current?(@slots)
          pause = visit
          @lock.synchronize { @wake.wait(@lock, pause) }
        end
      end

      # One pass: the keys due, each visited; returns how long to sleep.
      def visit
        interval = self.class.interval
        keys, claim, next_in = @slots.due(RECHECK)
        keys.each { |key| @slots.reap(key, claim) }
        @failures = 0
        return 0 if keys.size >= 100 # more may be due

        next_in ? next_in.clamp(0.001, interval) : interval
      rescue Ferrolock::Error => e
        # Once per outage (its second failed visit: a server stopped as the process ends says nothing).
        @failures = @failures.to_i + 1
        Ferrolock.log(:warn, "ferrolock: limits_concurrency timer: #{e.class}: #{e.message}") if @failures == 2
        interval
      end
    end
  end
end
