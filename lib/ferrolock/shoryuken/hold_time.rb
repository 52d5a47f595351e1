# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # How long LockMiddleware held a message's in-progress lease, for :released and
    # :released_after_error's :held (seconds, Ferrolock.monotonic, as DistMutex's :released).
    module HoldTime
      module_function

      # Records lease in held (LockMiddleware's { lease:, settled:, since: }) with its grant time; the
      # time first, so a recorded lease always has one.
      def start(held, lease)
        held[:since] = Ferrolock.monotonic
        held[:lease] = lease
      end

      # event with payload, extra and :held.
      def instrument(event, held, payload, **extra)
        Ferrolock.instrument(event, payload.merge(extra, held: Ferrolock.monotonic - held[:since]))
      end
    end
  end
end
