# frozen_string_literal: true

module Ferrolock
  class Admin
    # Conversions shared by the readers: Redis replies to Ruby values.
    module Reading
      module_function

      # PTTL in seconds: nil when the key is gone (-2) or has no expiry (-1).
      def ttl(pttl)
        pttl.is_a?(Integer) && pttl >= 0 ? pttl / 1000.0 : nil
      end

      # Redis time in ms (scores of ferrolock's sorted sets are Redis time).
      def now_ms(client)
        seconds, micros = client.call("TIME")
        (Integer(seconds) * 1000) + (Integer(micros) / 1000)
      end

      # The live waiters in a line (a list: a DistMutex's `waiters`, a ConcurrentLimiter's `line`);
      # a key of another type under that name is not a line (an older version's sorted set).
      # Entries are "token|deadline ms" (Redis time), "|@inbox" after it when the waiter is granted
      # through its grant inbox: one past its deadline is a waiter that gave up or died, and is
      # skipped by the release too, so it is not counted (of the first 1,000).
      def line_length(client, key)
        return 0 unless client.call("TYPE", key) == "list"

        now = now_ms(client)
        client.call("LRANGE", key, 0, 999).count do |entry|
          deadline = entry[/\|(\d+)(?:\|@\w+)?\z/, 1]
          deadline.nil? || Integer(deadline) > now
        end
      end
    end
  end
end
