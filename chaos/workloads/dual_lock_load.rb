# frozen_string_literal: true

require_relative "base"

module Chaos
  module Workloads
    # DualLock "no update lost": each job is a trigger. Its time on the shared clock is the
    # update's version (a run that starts later reads it), so the source of truth is the
    # journal on disk, which survives a Redis restart without persistence. The job then calls
    # run; a run that raised is retried (what Sidekiq's retry or the middleware's reschedule
    # does) up to JOB_ATTEMPTS times and then reported as given up: never dropped silently.
    class DualLockLoad < Base
      def initialize(**)
        super
        @locks = Settings::DUAL_KEYS.to_h do |key|
          [key, Ferrolock::DualLock.new(key, wait_ttl: Settings::LEASE, exec_ttl: Settings::LEASE,
                                             max_wait: Settings::MAX_WAIT, client: @client)]
        end
      end

      def prim = "dual"

      private

      def step
        key = Settings::DUAL_KEYS.sample
        job = next_id
        @journal.write(ev: "trigger", job: job, key: key, t: Chaos.now, pid: Process.pid)
        result = nil
        Settings::JOB_ATTEMPTS.times do
          result = attempt(@locks.fetch(key), job)
          break if %w[ran skipped].include?(result)

          sleep Settings::RETRY_AFTER
        end
        @journal.write(ev: "job_done", job: job, result: result)
        pause(0.0, 0.08)
      end

      # One call of run: "ran", "skipped", or why it raised before its block ran.
      def attempt(lock, job)
        started = Chaos.now
        @journal.write(ev: "attempt", job: job, key: lock.key, a0: started, pid: Process.pid)
        call = { ran: false }
        begin
          watch_release
          call[:result] = lock.run do
            call[:ran] = true
            wait_record(started, Settings::MAX_WAIT, "acquired")
            section_start(job, lock.key)
            section_pause(0.03, 0.12)
            call[:ended] = block_ended(job)
          end
          call[:error] = release_failure
        rescue Ferrolock::Error => e
          call[:error] = e
        end
        record_attempt(job, started, call)
      end

      def record_attempt(job, started, call)
        section_end(job, call[:ended], call[:error]) if call[:ran]
        outcome = attempt_outcome(call)
        wait_record(started, Settings::MAX_WAIT, outcome) unless call[:ran]
        @journal.write(ev: "attempt_end", job: job, a1: Chaos.now, result: outcome)
        outcome
      end

      def attempt_outcome(call)
        return "ran" if call[:ran]
        return outcome_of(call[:error]) if call[:error]

        call[:result] ? "ran" : "skipped"
      end
    end
  end
end
