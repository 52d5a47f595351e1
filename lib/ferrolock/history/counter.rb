# frozen_string_literal: true

module Ferrolock
  module History
    # One DistMutex's or ConcurrentLimiter's :acquired and :released, with their waits' and holds'
    # histogram steps, counted on its hot path with nothing built per event: no payload, no Mutex, no
    # Hash lookup (the object, its primitive and name are resolved once, when it is made), and no clock
    # read: the caller passes the Ferrolock.monotonic reading it took for the wait or hold, and the
    # minute's end is kept on that clock (the realtime clock is read once a minute, in enter). Counts
    # are Integers in an Array per minute, added under the GVL (an element's `+= 1` has no thread
    # switch inside it); the flush thread reads them and writes what grew since its last read
    # (Counters), so counting never waits for a flush. When a subscriber or an
    # ActiveSupport::Notifications listener may want the event, it goes to Ferrolock.instrument
    # instead, whose History.record counts it.
    class Counter
      EVENTS = %i[acquired released].freeze
      SECONDS_KEYS = %i[waited held].freeze
      ACQUIRED = 0
      RELEASED = 1
      LAST_STEP = Buckets::LAST_WAIT_STEP
      STEPS = LAST_STEP + 1
      WAITS = 2
      HOLDS = WAITS + STEPS
      SIZE = HOLDS + STEPS
      # Each slot's counter, as Buckets names it in a field.
      SLOTS = (EVENTS + Buckets::WAIT_COUNTERS + Buckets::HOLD_COUNTERS).freeze
      MINUTE = Buckets::MINUTE.seconds
      # Before any monotonic reading: a Counter with no minute enters on its next count.
      NEVER = -Float::INFINITY
      HISTORY = :history # Ferrolock.audience's answer when History alone listens

      attr_reader :primitive, :name

      def initialize(primitive, name)
        @primitive = primitive
        @name = name
        @minute = nil # the minute @counts is for; nil until Counters lets it count (enter)
        @ends = NEVER # when that minute ends, on Ferrolock.monotonic's clock
        @counts = nil
        @thread = nil # the flush thread that reads it
      end

      # :acquired after waiting waited seconds, granted at now (Ferrolock.monotonic), for audience
      # (Ferrolock.audience, not nil): counted here when History alone listens, else to
      # Ferrolock.instrument with the block's payload. One call and one Ruby frame, the histogram step
      # computed in place (as Buckets.wait_step does for waited >= 0, which a monotonic clock gives): on
      # a loaded machine each Ruby frame more on this path cost a DistMutex cycle about 0.5 µs.
      def acquired(audience, waited, now)
        return Ferrolock.instrument(:acquired, yield) unless audience == HISTORY

        counts = @counts
        return count(ACQUIRED, WAITS, waited) unless counts && now < @ends && @thread.alive?

        counts[ACQUIRED] += 1
        step = (waited * 1000).to_i.bit_length # Buckets.wait_step, inlined (see above)
        counts[WAITS + (step > LAST_STEP ? LAST_STEP : step)] += 1
        nil
      end

      # :released after holding held seconds, released at now, as acquired.
      def released(audience, held, now)
        return Ferrolock.instrument(:released, yield) unless audience == HISTORY

        counts = @counts
        return count(RELEASED, HOLDS, held) unless counts && now < @ends && @thread.alive?

        counts[RELEASED] += 1
        step = (held * 1000).to_i.bit_length # Buckets.wait_step, inlined
        counts[HOLDS + (step > LAST_STEP ? LAST_STEP : step)] += 1
        nil
      end

      # Counters' side, under its lock. Counts minute's events from now on (read by thread) until
      # ends (Ferrolock.monotonic); fresh: the counter is new to its Counters (first count, after it was
      # left idle, in a forked child), so what it holds was flushed or is not this process's.
      def enter(minute, ends, thread, fresh)
        if fresh
          @past = []
          @written = {}
        elsif @minute != minute # the minute before waits for its last flush (a late count may land in it)
          @past << [@minute, @counts]
        end
        @counts = Array.new(SIZE, 0) if fresh || @minute != minute
        @minute = minute
        @ends = ends
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
        # @ends first: a count between the two sees no minute rather than a minute with no counts (the
        # hot path checks both anyway).
        @ends = NEVER
        @minute = @counts = @past = @written = nil
        true
      end

      private

      # Another minute, a new flush thread or a forked child: Counters says where to count.
      def count(event, steps, seconds)
        counts = History.counts_for(self)
        return overflow(event, seconds) unless counts

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
