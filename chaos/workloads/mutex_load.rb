# frozen_string_literal: true

require_relative "base"

module Chaos
  module Workloads
    # DistMutex holders: each records its section (start, end, fencing token, outcome) and every
    # lock(timeout:) call's duration.
    class MutexLoad < Base
      def initialize(**)
        super
        @mutexes = Settings::MUTEX_NAMES.to_h do |name|
          # FERROLOCK_CHAOS_FAIR=false runs the mutexes in unfair mode (issue 43).
          [name, Ferrolock::DistMutex.new(name, lease: Settings::LEASE, client: @client,
                                                fair: ENV.fetch("FERROLOCK_CHAOS_FAIR", "true") != "false")]
        end
      end

      def prim = "mutex"

      private

      def step
        name = Settings::MUTEX_NAMES.sample
        mutex = @mutexes.fetch(name)
        hold(mutex) if acquire(mutex)
        pause(0.0, 0.03)
      end

      def acquire(mutex)
        started = Chaos.now
        mutex.lock(timeout: Settings::LOCK_TIMEOUT)
        wait_record(started, Settings::LOCK_TIMEOUT, "acquired")
        true
      rescue Ferrolock::Error => e
        wait_record(started, Settings::LOCK_TIMEOUT, outcome_of(e))
        sleep 0.05 unless e.is_a?(Ferrolock::TimeoutError)
        false
      end

      def hold(mutex)
        id = next_id
        section_start(id, mutex.name, token: mutex.fencing_token)
        section_pause(0.01, 0.06)
        ended = block_ended(id)
        error = release(mutex)
        section_end(id, ended, error)
      end

      def release(mutex)
        mutex.unlock
        nil
      rescue Ferrolock::Error => e
        e
      end
    end
  end
end
