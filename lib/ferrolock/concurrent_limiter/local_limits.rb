# frozen_string_literal: true

module Ferrolock
  class ConcurrentLimiter
    # The limit this process's ConcurrentLimiters pass, by namespace and name, for the operators'
    # view. Redis stores the limit of the latest caller (any process) to take a free slot; a web
    # process running the app's code (the Web tab, or `ferrolock limiters --require FILE`) also
    # knows what the app passes, so a mismatch shows ("5 (stored 3)": an old deploy or another app
    # passes 3). The latest object per name wins; the MAX most recently made names are kept.
    module LocalLimits
      MAX = 10_000
      @made = RecentlyMade.new(MAX)

      def self.record(namespace, name, count)
        @made.record([namespace, name], count)
      end

      # The limit of this process's latest limiter of that name, or nil.
      def self.[](namespace, name)
        @made[[namespace, name]]
      end
    end
  end
end
