# frozen_string_literal: true

# Ferrolock.monotonic, for measuring waits in events. Lock state never depends on it: leases
# and expiries use Redis' clock.
module Ferrolock
  def self.monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
