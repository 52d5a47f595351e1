# frozen_string_literal: true

module Ferrolock
  module History
    # The Counters this process's flush thread reads: every one that counted in this minute or the
    # one before, at most MAX at once (a Counter beyond them counts through History.record, whose
    # Tally folds names beyond its own MAX_NAMES into Buckets::ROLLUP), so thousands of short-lived
    # DistMutex objects never grow memory without bound: each Counter in holds a few Arrays of
    # Counter::SIZE Integers (this minute's, the one before's, what was written of each), and a flush
    # at most MAX + Tally::MAX_NAMES names (2,000). The lock guards who is in and a Counter's move to a
    # new minute; counting itself never takes it.
    class Counters
      MAX = 1000

      def initialize
        @lock = Mutex.new
        @counters = {}.compare_by_identity
      end

      # The Array counter counts minute's events in until ends (Ferrolock.monotonic; thread: the
      # flush thread), or nil when MAX others are in.
      def enter(counter, minute, ends, thread)
        @lock.synchronize do
          known = @counters.key?(counter)
          next nil unless known || @counters.size < MAX

          @counters[counter] = true
          counter.enter(minute, ends, thread, !known)
        end
      end

      # Adds what every Counter counted since the last collect to out ({ [minute start, field] =>
      # count }) and drops those idle since the minute before minute; returns out.
      def collect(out, minute)
        @lock.synchronize do
          @counters.delete_if { |counter, _| !counter.collect(out, minute) && counter.leave }
        end
        out
      end

      def size
        @counters.size
      end
    end
  end
end
