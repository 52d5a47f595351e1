# frozen_string_literal: true

require_relative "history/buckets"
require_relative "history/tally"
require_relative "history/store"
require_relative "history/counter"
require_relative "history/counters"

module Ferrolock
  # Per-minute history of every event, by primitive and name, in Redis (Buckets): off unless
  # `c.history = true` (or FERROLOCK_HISTORY=1). Every event is counted in this
  # process (no Redis on the hot path: a DistMutex's and a ConcurrentLimiter's :acquired and
  # :released by the Rust core in their Counter's tally, every other event in the Tally); one
  # thread writes them every FLUSH_EVERY seconds, and just after each minute's end, as one
  # script (Store), and once more at exit, so a process that dies loses at most one flush. Read
  # back with Ferrolock::Admin#stats and `ferrolock stats NAME`. Not with Ferrolock::Testing
  # installed: an app's test suite writes no history.
  module History
    FLUSH_EVERY = 5.0
    LOCK = Mutex.new
    private_constant :LOCK

    @enabled = false
    @tally = Tally.new
    @counters = Counters.new
    @thread = nil
    @generation = nil
    @flush_every = FLUSH_EVERY
    @drained_at = nil # when the Counters were last drained (whole seconds since the epoch)
    @failing_since = nil

    class << self
      # Seconds between flushes (a spec shortens it).
      attr_accessor :flush_every

      # On or off (Ferrolock.configure calls it with c.history). Not a subscriber: Ferrolock.instrument
      # hands it every event directly (see record_events_with), on a hot path.
      def apply(enabled)
        LOCK.synchronize do
          @enabled = enabled ? true : false
          Ferrolock.record_events_with(@enabled ? self : nil)
        end
        nil
      end

      def enabled?
        @enabled == true
      end

      # Counts one event.
      def record(event, payload)
        return if !@enabled || Backend.factory || !(Hash === payload) # rubocop:disable Style/CaseEquality -- BasicObject-safe

        ensure_flushing unless @thread&.alive?
        @tally.add(event, payload, Process.clock_gettime(Process::CLOCK_REALTIME, :second))
      end

      # The Native::Tally counter (a Counter) counts in from now on, or nil when it may not: History
      # off, under Testing, or no flush thread (the process exits).
      def tally_for(counter)
        return nil if !@enabled || Backend.factory

        ensure_flushing
        thread = @thread
        return nil unless thread&.alive?

        @counters.enter(counter, thread)
      end

      # Writes what was counted since the last flush, in one round trip; the number of fields written.
      # Redis down: those counts are dropped (logged), the next flush starts afresh. The Counters'
      # counts are written as the minute of the drain before this one: the flush thread drains just
      # after each minute's end (pause), so they are their own minute's but for the time it woke late.
      def flush!
        now = Process.clock_gettime(Process::CLOCK_REALTIME, :second)
        minute = Buckets.start_of(@drained_at || now, Buckets::MINUTE)
        @drained_at = now
        counts = @counters.collect(@tally.take, minute)
        # Under Testing nothing is written (record counts nothing there either): what a Counter that
        # entered before ferrolock/testing was loaded still counts in its tally is dropped here.
        return 0 if counts.empty? || Backend.factory

        Store.write(Ferrolock.client, counts)
        @failing_since = nil
        counts.size
      rescue Ferrolock::Error => e
        failed(e, counts.size)
        0
      end

      private

      # Logs the first failure of a streak, then one a minute (a Redis down, or an ACL refusing the
      # {history} keys, would otherwise log every flush).
      def failed(error, dropped)
        now = Ferrolock.monotonic
        return if @failing_since && now - @failing_since < 60

        @failing_since = now
        Ferrolock.log(:warn, "ferrolock: history flush failed, #{dropped} count(s) dropped (logged once a " \
                             "minute while it fails): #{error.class}: #{error.message}")
      end

      # When the flush thread is not alive (record asks only that on every event: a forked child's
      # copy of it is dead). A forked child starts its own thread and drops the counts it inherited
      # (its parent flushes those); its Counters start empty, so each Counter enters afresh.
      def ensure_flushing
        return if flushing?

        LOCK.synchronize do
          next if flushing?

          generation = Native.fork_generation
          unless @generation == generation
            @tally = Tally.new
            @counters = Counters.new
          end
          @generation = generation
          start_thread
        end
      end

      # Seconds until the next flush: flush_every, or until just after the minute's end (see flush!);
      # 50 ms after it, more than sleep's monotonic clock can drift from the realtime one in a minute
      # (NTP slews it by at most 500 ppm: 30 ms).
      def pause
        left = Buckets::MINUTE.seconds - (Process.clock_gettime(Process::CLOCK_REALTIME) % Buckets::MINUTE.seconds)
        [@flush_every, left + 0.05].min
      end

      def flushing?
        @generation == Native.fork_generation && @thread&.alive?
      end

      def start_thread
        # Clean interrupt masks (an event may be counted from code that runs masked), so exit ends it at once.
        @thread = begin
          Thread.new { Thread.handle_interrupt(Object => :immediate) { flush_loop } }
        rescue ThreadError # the process is exiting (its threads' ensure blocks release): at_exit flushes
          return
        end
        @drained_at = Process.clock_gettime(Process::CLOCK_REALTIME, :second) # (what the Counters hold is from now on)
        @thread.name = "ferrolock-history"
        @thread.report_on_exception = false
        return if @at_exit

        @at_exit = true
        at_exit { flush! if enabled? }
      end

      def flush_loop
        loop do
          sleep(pause)
          begin
            flush!
          rescue StandardError => e # a bad configuration: keep counting, say why each time
            Ferrolock.log(:warn, "ferrolock: history flush failed: #{e.class}: #{e.message}")
          end
        end
      end
    end
  end
end
