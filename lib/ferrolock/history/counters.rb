# frozen_string_literal: true

module Ferrolock
  module History
    # The Counters this process's flush thread drains: every one that counted in this minute or the
    # one before, at most MAX at once; a Counter beyond them counts in its primitive's (other)
    # Counter (Buckets::ROLLUP), so thousands of short-lived DistMutex objects never grow memory
    # without bound: a flush writes at most MAX + 2 of their names, beside the Tally's
    # Tally::MAX_NAMES (2,000, the README's bound). The lock guards who is in; counting never takes it.
    class Counters
      MAX = 1000

      def initialize
        @lock = Mutex.new
        @counters = {}.compare_by_identity
        @rollups = {}
      end

      # The Native::Tally counter counts in from now on (thread: the flush thread): its own, or its
      # primitive's (other) Counter's when MAX others are in.
      def enter(counter, thread)
        @lock.synchronize do
          counter = rollup(counter.primitive) unless @counters.key?(counter) || @counters.size < MAX
          fresh = !@counters.key?(counter)
          @counters[counter] = true
          counter.enter(thread, fresh)
        end
      end

      # Adds what every Counter counted since the last collect to out ({ [minute start, field] =>
      # count }) as minute's, and drops those idle since the minute before; returns out.
      def collect(out, minute)
        @lock.synchronize do
          @counters.delete_if { |counter, _| !counter.collect(out, minute) && counter.leave }
        end
        out
      end

      def size
        @counters.size
      end

      private

      def rollup(primitive)
        @rollups[primitive] ||= Counter.new(primitive, Buckets::ROLLUP)
      end
    end
  end
end
