# frozen_string_literal: true

require_relative "tally"

module Chaos
  module GcStress
    # One round's disturbances: a thread that raises StormError into random workers every few
    # milliseconds and now and then kills one (starting a replacement), and a thread that calls
    # GC.compact in a loop, so objects move while native calls are in flight on other threads.
    class Storm
      # One victim in KILL_ODDS is killed instead of raised into.
      KILL_ODDS = 40
      # One turn in SIGNAL_ODDS also sends the process a SIGUSR2.
      SIGNAL_ODDS = 4
      # Longest pause between two raises, and between two compactions (seconds).
      RAISE_GAP = 0.004
      COMPACT_GAP = 0.05

      attr_reader :raises, :kills, :compactions

      def initialize(rng)
        @rng = Random.new(rng.rand(1 << 62))
        @lock = Mutex.new
        @workers = []
        @raises = 0
        @kills = 0
        @compactions = 0
      end

      def add(thread)
        @lock.synchronize { @workers << thread }
        thread
      end

      # Every worker of the round, replacements included.
      def threads
        @lock.synchronize { @workers.dup }
      end

      # Starts both threads until `stop`; `respawn` makes a worker for a load (after a kill).
      def start(stop, &respawn)
        @threads = [Thread.new { storm(stop, respawn) }, Thread.new { compact(stop) }]
      end

      # Waits for both threads (they end at `stop`).
      def finish
        @threads.each(&:join)
      end

      private

      def storm(stop, respawn)
        while now < stop
          Kernel.sleep(@rng.rand * RAISE_GAP)
          victim = threads.select(&:alive?).sample(random: @rng)
          next unless victim

          @rng.rand(KILL_ODDS).zero? ? kill(victim, respawn) : raise_into(victim)
          # A signal (trapped by the harness) now and then: Ruby's handler, on whichever thread
          # the kernel picks (ferrolock's own included), interrupts the main thread.
          Process.kill("USR2", Process.pid) if @rng.rand(SIGNAL_ODDS).zero?
        end
      end

      def raise_into(victim)
        victim.raise(StormError, "storm")
        @raises += 1
      rescue ThreadError
        nil # it ended meanwhile
      end

      # Thread#kill runs the victim's ensure clauses (the releases) as it unwinds.
      def kill(victim, respawn)
        victim.kill
        @kills += 1
        add(respawn.call(victim[:gc_stress_load]))
      end

      def compact(stop)
        while now < stop
          GC.compact
          @compactions += 1
          # Now and then a full GC that is not a compaction, so both kinds interleave with calls.
          GC.start(full_mark: true, immediate_sweep: @rng.rand(2).zero?) if @rng.rand(4).zero?
          Kernel.sleep(@rng.rand * COMPACT_GAP)
        end
      end

      def now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end
