# frozen_string_literal: true

module Ferrolock
  module History
    # One DistMutex's or ConcurrentLimiter's :acquired and :released, with their waits' and holds'
    # histogram steps, counted on its hot path with nothing built per event: no payload, no Mutex, no
    # Hash lookup (the object, its primitive and name are resolved once, when it is made). Counts are
    # Integers in an Array per minute, added under the GVL (an element's `+= 1` has no thread switch
    # inside it); the flush thread reads them and writes what grew since its last read (Counters), so
    # counting never waits for a flush. When a subscriber or an ActiveSupport::Notifications listener
    # may want the event, it goes to Ferrolock.instrument instead, whose History.record counts it.
    class Counter
      EVENTS = %i[acquired released].freeze
      SECONDS_KEYS = %i[waited held].freeze
      ACQUIRED = 0
      RELEASED = 1
      STEPS = Buckets::LAST_WAIT_STEP + 1
      WAITS = 2
      HOLDS = WAITS + STEPS
      SIZE = HOLDS + STEPS
      # Each slot's counter, as Buckets names it in a field.
      SLOTS = (EVENTS + Buckets::WAIT_COUNTERS + Buckets::HOLD_COUNTERS).freeze
      MINUTE = Buckets::MINUTE.seconds

      attr_reader :primitive, :name

      def initialize(primitive, name)
        @primitive = primitive
        @name = name
        @minute = nil # the minute @counts is for; nil until Counters lets it count (enter)
        @counts = nil
        @thread = nil # the flush thread that reads it
      end

      # :acquired after waiting waited seconds: to Ferrolock.instrument with the block's payload when
      # someone subscribed, else counted here.
      def acquired(waited)
        return count(ACQUIRED, WAITS, waited) unless Ferrolock.subscribed?(:acquired)

        Ferrolock.instrument(:acquired, yield)
      end

      # :released after holding held seconds, as acquired.
      def released(held)
        return count(RELEASED, HOLDS, held) unless Ferrolock.subscribed?(:released)

        Ferrolock.instrument(:released, yield)
      end

      # Counters' side, under its lock. Counts minute's events from now on (read by thread); fresh:
      # the counter is new to its Counters (first count, after it was left idle, in a forked child),
      # so what it holds was flushed or is not this process's.
      def enter(minute, thread, fresh)
        if fresh
          @past = []
          @written = {}
        elsif @minute != minute # the minute before waits for its last flush (a late count may land in it)
          @past << [@minute, @counts]
        end
        @counts = Array.new(SIZE, 0) if fresh || @minute != minute
        @minute = minute
        @thread = thread
        @counts
      end

      # Adds what was counted since the last collect to out ({ [minute start, field] => count });
      # false once it counted nothing in this minute or the one before (Counters drops it then).
      def collect(out, minute)
        [[@minute, @counts], *@past].each { |start, counts| changes(out, start, counts) }
        # A minute over for a minute gets no more counts (a thread would have to stall that long
        # between reading the clock and counting).
        done = @past.select { |start, _| start < minute - MINUTE }
        done.each { |start, _| @written.delete(start) }
        @past -= done
        @minute >= minute - MINUTE
      end

      # Dropped by Counters: its next count asks to enter again.
      def leave
        @minute = @counts = @past = @written = nil
        true
      end

      private

      def count(event, steps, seconds)
        now = Process.clock_gettime(Process::CLOCK_REALTIME, :second)
        counts = @counts
        # Another minute, a new flush thread or a forked child: Counters says where to count.
        unless @minute == now - (now % MINUTE) && @thread.alive?
          counts = History.counts_for(self, now)
          return overflow(event, seconds) unless counts
        end
        counts[event] += 1
        counts[steps + Buckets.wait_step(seconds)] += 1
        nil
      end

      def changes(out, start, counts)
        written = (@written[start] ||= Array.new(SIZE, 0))
        counts.each_with_index do |count, slot|
          next if count == written[slot]

          key = [start, Buckets.field(@primitive, SLOTS[slot], @name)]
          out[key] = out.fetch(key, 0) + count - written[slot]
          written[slot] = count
        end
      end

      # Not counted here (History off or under Testing, Counters full): as any event (History.record's
      # Tally, with its own bound).
      def overflow(event, seconds)
        History.record(EVENTS[event], { primitive: @primitive, name: @name, SECONDS_KEYS[event] => seconds })
      end
    end
  end
end
