# frozen_string_literal: true

module Ferrolock
  class ConcurrentLimiter
    # The limit this process's ConcurrentLimiters pass, by namespace and name, for the operators'
    # view. Redis stores the limit of the latest caller (any process) to take a free slot; a web
    # process running the app's code (the Web tab, or `ferrolock limiters --require FILE`) also
    # knows what the app passes, so a mismatch shows ("5 (stored 3)": an old deploy or another app
    # passes 3). The latest object per name wins. At most MAX names are kept, the most recently
    # made ones: an app making limiters per tenant does not grow it without bound, and a limiter
    # made after many others is still shown (a Hash keeps insertion order, so the oldest goes).
    module LocalLimits
      MAX = 10_000
      @limits = {}
      @lock = Mutex.new

      class << self
        def record(namespace, name, count)
          key = [namespace, name]
          @lock.synchronize do
            @limits.delete(key)
            @limits[key] = count
            @limits.shift if @limits.size > MAX
          end
          count
        end

        # The limit of this process's latest limiter of that name, or nil.
        def [](namespace, name)
          @lock.synchronize { @limits[[namespace, name]] }
        end
      end
    end
  end
end
