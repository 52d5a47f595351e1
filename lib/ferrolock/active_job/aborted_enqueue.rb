# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # An enqueue that limits_concurrency or a concurrency_rule refused ends as ActiveJob's aborted
    # enqueue on every version (6.1 to 8.1): perform_later returns false, the `enqueue.active_job`
    # event carries `aborted: true`, ActiveJob logs "Failed enqueuing …, a before_enqueue callback
    # halted" instead of "Enqueued …", and (7.1+) `successfully_enqueued?` is false. It is what a
    # `throw :abort` in before_enqueue does, through the same hook ActiveJob's instrumentation reads.
    module AbortedEnqueue
      module_function

      # A new enqueue of the job begins (ferrolock's outermost enqueue callback).
      def reset(job)
        job.instance_variable_set(:@ferrolock_refused, false)
      end

      # Whether the enqueue went through: not refused here, and taken by the adapter (7.1+ records
      # an EnqueueError instead of raising). perform_all_later's answer comes after its bulk
      # enqueue: EnqueueAll settles then.
      def enqueued?(job)
        return false if job.instance_variable_get(:@ferrolock_refused)

        EnqueueAll.deferred?(job) || !job.respond_to?(:successfully_enqueued?) || job.successfully_enqueued?
      end

      # Returns false (what the around_enqueue callback returns for the refused job).
      def mark(job)
        # Read by the callbacks around this one (enqueued?): what they took goes back.
        job.instance_variable_set(:@ferrolock_refused, true)
        # perform_all_later runs no callbacks: EnqueueAll reports the refusal its own way.
        return false if EnqueueAll.deferred?(job)

        # (Named :ferrolock_refused, not :enqueue: 6.1 would warn that after_enqueue callbacks will stop running.)
        job.send(:halted_callback_hook, "ferrolock", :ferrolock_refused)
        job.successfully_enqueued = false if job.respond_to?(:successfully_enqueued=)
        false
      end
    end
  end
end
