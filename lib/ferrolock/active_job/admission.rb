# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # One job under its policy: its key and the Slots of the client in use.
    Admission = Struct.new(:job, :policy, :key, :slots) do
      def admit(at_perform:) = slots.admit(job, policy, key, at_perform: at_perform)

      def log(message)
        Ferrolock.logger.info("ferrolock: #{job.class.name} #{job.job_id}: #{message}")
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
