# frozen_string_literal: true

module Ferrolock
  module History
    # One DistMutex's or ConcurrentLimiter's :acquired and :released, with their waits' and holds'
    # histogram steps, counted by the Rust core when History alone listens (issue 41): the primitive
    # passes tally (a Native::Tally) to the native call it makes anyway, which times the wait and the
    # hold itself and counts in atomics as it returns. No payload, clock read or count runs in Ruby.
    # The flush thread drains the tally (collect) into the minute it writes. When a subscriber or an
    # ActiveSupport::Notifications listener may want the event, the primitive sends it to
    # Ferrolock.instrument instead, whose History.record counts it (never both: the audience is read
    # once per event).
    class Counter
      EVENTS = %i[acquired released].freeze
      # Each slot's counter, in Native::Tally#drain's order (ferrolock-core's tally.rs).
      SLOTS = (EVENTS + Buckets::WAIT_COUNTERS + Buckets::HOLD_COUNTERS).freeze
      MINUTE = Buckets::MINUTE.seconds

      attr_reader :primitive, :name

      def initialize(primitive, name)
        @primitive = primitive
        @name = name
        @native = nil # its Native::Tally, made when it first enters (none with History off)
        @thread = nil # the flush thread that drains it; nil until Counters lets it count (enter)
        @generation = nil # the process (Native.fork_generation) it was let count in
        @counted = nil # the last minute it counted in
      end

      # The Native::Tally to count this event in (History alone listens), or nil when it may not
      # count (History off, under Testing, the process exits). One check of the flush thread on the
      # hot path; a new flush thread (a forked child's) or a Counter left idle asks Counters again,
      # which may hand out its primitive's (other) Counter's tally when MAX others are in.
      def tally
        @thread&.alive? ? @native : History.tally_for(self)
      end

      # tally when History alone listens to the event (audience: Ferrolock.audience's answer), else
      # nil: the primitive then sends the event to Ferrolock.instrument itself, or nobody listens.
      def tally_when(audience)
        tally if audience == :history
      end

      # Counters' side, under its lock: counts from now on, drained by thread; fresh: new to its
      # Counters. Returns the tally.
      def enter(thread, fresh)
        generation = Native.fork_generation
        # What a forked child inherited is its parent's (the parent flushes it): dropped before the
        # child's first count (nothing counts in it until @thread is set below).
        @native.drain if fresh && @generation && @generation != generation
        @native ||= Native::Tally.new
        @generation = generation
        @counted = nil if fresh
        @thread = thread
        @native
      end

      # Adds what was counted since the last collect to out ({ [minute start, field] => count }) as
      # minute's; false once it counted nothing in this minute or the one before (Counters drops it
      # then).
      def collect(out, minute)
        counts = @native.drain
        @counted = minute if counts || @counted.nil?
        counts&.each_with_index do |count, slot|
          next if count.zero?

          key = [minute, Buckets.field(@primitive, SLOTS[slot], @name)]
          out[key] = out.fetch(key, 0) + count
        end
        @counted >= minute - MINUTE
      end

      # Dropped by Counters: its next count asks to enter again (a count racing this stays in the
      # tally and is written after that).
      def leave
        @thread = nil
        true
      end
    end
  end
end
