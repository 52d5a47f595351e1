# frozen_string_literal: true

module FerrolockTest
  # A hold an example leaves is renewed until a later flush, and then reported :lock_lost in whichever
  # example runs at that moment: the example that left it fails instead. Two checks: a DistMutex its
  # thread still holds (named: `lock` is the one hold not bound to a block), and any lease more than
  # the process renewed before it, for every primitive (a limiter slot, a DualLock, a MessageLock …
  # held by a thread the example left running).
  module HoldsLeft
    extend Timing

    # How long a thread the example stopped may take to give back what it held (s).
    SETTLE = 5

    def self.run(example, settle: SETTLE)
      held = Ferrolock::DistMutex::Owners.held_by(Thread.current)
      leases = Ferrolock::Native.renewed_leases
      example.run
      left = Ferrolock::DistMutex::Owners.held_by(Thread.current) - held
      unless left.empty?
        raise "this example left #{left.map { |o| o.name.inspect }.join(", ")} held by its thread " \
              "(unlock it in an ensure)"
      end

      wait_until(timeout: settle, what: -> { leases_left(leases) }) { Ferrolock::Native.renewed_leases <= leases }
    end

    def self.leases_left(before)
      "this example left #{Ferrolock::Native.renewed_leases - before} lease(s) renewed that it did not find " \
        "(a hold of a thread it did not join): their release"
    end
  end
end
