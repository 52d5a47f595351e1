# frozen_string_literal: true

module Ferrolock
  # What this process made lately, by key, for the operators' views: the Web tab and
  # `ferrolock --require` show the limit the app's own limiters pass beside what Redis holds.
  # Thread-safe and bounded: at most `max` keys, the most recently recorded ones (a Hash keeps
  # insertion order, so the oldest goes first), so an app making limiters per tenant does not
  # grow it without bound and a limiter made after many others is still shown.
  class RecentlyMade
    def initialize(max)
      @max = max
      @entries = {}
      @lock = Mutex.new
    end

    # Records `value` as the latest for `key` and returns it.
    def record(key, value)
      @lock.synchronize do
        @entries.delete(key)
        @entries[key] = value
        @entries.shift if @entries.size > @max
      end
      value
    end

    # The latest value recorded for `key`, or nil.
    def [](key)
      @lock.synchronize { @entries[key] }
    end
  end
end
