# frozen_string_literal: true

require_relative "compat"

module Ferrolock
  module Sidekiq
    # Pushes a job again for later WITHOUT counting a retry: the same jid, class and arguments,
    # scheduled `delay` seconds from now, with a per-reason counter in the payload. Used when
    # ferrolock cannot decide now (a limiter is full, a duplicate waited too long): the job is
    # delayed, never dropped.
    module Reschedule
      # Set (to the new run time) in the RUNNING job's hash once it was pushed again, so a middleware
      # further out (Unique::ServerMiddleware) knows this run ends as a reschedule, not as the job's end.
      MARK = "ferrolock_rescheduled_at"

      module_function

      # Returns the new counter value.
      def call(job, delay:, counter:)
        count = job.fetch(counter, 0).to_i + 1
        at = Time.now.to_f + delay
        payload = job.merge(counter => count, "at" => at)
        payload.delete("enqueued_at")
        payload.delete(MARK)
        job[MARK] = at if ::Sidekiq::Client.push(payload)
        count
      end

      # The delay a backoff proc answered (the block calls it), or Ferrolock::Backoff's when there
      # is no proc or it answered no usable delay (logged, naming `what`).
      def delay(count, backoff_proc, what, &block)
        Backoff.answered(count, backoff_proc, ->(why) { Ferrolock.log(:warn, "ferrolock: #{what} #{why}") }, &block)
      end

      # When a job pushed `delay` seconds ahead runs, honestly: it is due then, and Sidekiq moves it
      # to its queue at the scheduler's next poll after that.
      def due(delay)
        "rescheduled for #{delay.round(2)} s from now (then picked up at Sidekiq's next scheduled-set " \
          "poll, about every #{Compat.scheduled_poll_interval.round(1)} s)"
      end

      # The default backoff (Ferrolock::Backoff: 1 s, 2 s, 4 s … capped at 5 minutes, 50 % jitter).
      def backoff(count)
        Backoff.delay(count)
      end
    end
  end
end
