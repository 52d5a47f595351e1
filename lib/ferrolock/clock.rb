# frozen_string_literal: true

# Ferrolock.monotonic, for measuring waits in events.
module Ferrolock
  # Ferrolock extends this module. Lock state never depends on it: leases and expiries use Redis' clock.
  module Clock
    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end

  extend Clock
end
