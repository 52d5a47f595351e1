# frozen_string_literal: true

require_relative "base"

module Chaos
  module Workloads
    # ConcurrentLimiter holders: each records its section and how long within_limit waited.
    class LimiterLoad < Base
      def initialize(**)
        super
        @limiter = Ferrolock::ConcurrentLimiter.new(Settings::LIMITER_NAME, Settings::LIMIT,
                                                    wait_timeout: Settings::WAIT_TIMEOUT,
                                                    lock_timeout: Settings::LEASE, client: @client,
                                                    # FERROLOCK_CHAOS_FAIR=false: unfair mode (issue 43).
                                                    fair: ENV.fetch("FERROLOCK_CHAOS_FAIR", "true") != "false")
      end

      def prim = "limiter"

      private

      def step
        id = next_id
        started = Chaos.now
        entered = nil
        ended = nil
        error = nil
        begin
          watch_release
          @limiter.within_limit do
            entered = Chaos.now
            wait_record(started, Settings::WAIT_TIMEOUT, "acquired")
            section_start(id, @limiter.name)
            section_pause(0.05, 0.2)
            ended = block_ended(id)
          end
          error = release_failure
        rescue Ferrolock::Error => e
          error = e
        end
        finish(id, started, entered, ended, error)
        pause(0.0, 0.05)
      end

      # An error before the block ran ended the wait; one after it is the release's outcome.
      def finish(id, started, entered, ended, error)
        if entered
          section_end(id, ended, error)
        else
          wait_record(started, Settings::WAIT_TIMEOUT, outcome_of(error))
          sleep 0.05 unless error.is_a?(Ferrolock::OverLimit)
        end
      end
    end
  end
end
