# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # One job under its policy: its key and the Slots of the client in use.
    Admission = Struct.new(:job, :policy, :key, :slots) do
      def admit(at_perform:) = slots.admit(job, policy, key, at_perform: at_perform, promotion: Promotion.number(job))

      def log(message, level: :info)
        Ferrolock.logger.public_send(level, "ferrolock: #{job.class.name} #{job.job_id}: #{message}")
      end

      # A job not performed (nil): discarded or blocked at perform, or a duplicate copy (skipped: its
      # queue counts it done, nothing to retry).
      def not_performed(outcome, blocked)
        case outcome
        when :discarded
          log("discarded at perform: limits_concurrency key #{key} is at its limit")
          instrument(:discarded, :perform, reason: :on_conflict)
        when :duplicate then duplicate
        else
          log("blocked at perform (#{blocked} waiting): limits_concurrency key #{key} is at its limit")
          instrument(:blocked, :perform, waiting: blocked)
        end
        nil
      end

      def duplicate
        log("not performed: another copy of this job started already on limits_concurrency key #{key} (the job " \
            "was promoted again when this copy had not started within its lease, duration: #{policy.duration} s)",
            level: :warn)
        instrument(:discarded, :perform, reason: :duplicate)
      end

      # An enqueue refused (:discarded at enqueue): perform_later false, ActiveJob's aborted enqueue.
      def refuse(reason, why)
        log("discarded: #{why}")
        instrument(:discarded, :enqueue, reason: reason)
        AbortedEnqueue.mark(job)
      end

      # :blocked or :discarded, with where (:enqueue or :perform).
      def instrument(event, stage, **extra)
        Ferrolock.instrument(event, primitive: :limits_concurrency, name: key, job_class: job.class.name,
                                    job_id: job.job_id, at: stage, **extra)
      end
    end
  end
end
