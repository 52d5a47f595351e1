# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # Strategies that lock when the job is enqueued. A job that enqueues itself while it
        # performs (a retry_on retry, a continuation's resumption: the same job_id) takes its own
        # lock again, never a conflict; the same job enqueued twice otherwise (a producer's retry) is a
        # duplicate. A lock taken for an enqueue that then failed is freed.
        module LockingOnEnqueue
          def before_enqueue
            @job_aborted = false
            return if !enqueued_before? && lock(resource: lock_key, ttl: lock_ttl, keep: keep_expiry?)

            handle_conflict(resource: lock_key, on_conflict: on_conflict)
            abort_job
          rescue Ferrolock::ConnectionError, Ferrolock::TimeoutError => e
            handle_redis_connection_error(resource: lock_key, on_redis_connection_error: on_redis_connection_error,
                                          error: e)
            abort_job
          end

          def around_enqueue(block)
            return if @job_aborted

            performing = Performing.of(job)
            enqueued = false
            result = block.call
            enqueued = enqueued?
            result
          ensure
            enqueue_ended(performing, enqueued)
          end

          def holds_lock_while_performing? = false

          private

          def enqueue_ended(performing, enqueued)
            job.instance_variable_set(:@ferrolock_unique_enqueued, true) if enqueued
            performing.resumed = enqueued if performing
            # (A lock the job holds while it performs is kept or freed when its perform_now ends.)
            unlock(resource: lock_key) unless @job_aborted || enqueued || (performing && holds_lock_while_performing?)
          end

          def enqueued_before?
            job.instance_variable_get(:@ferrolock_unique_enqueued) == true && Performing.of(job).nil?
          end

          # ActiveJob 7.1+ reports an adapter's failure as successfully_enqueued? false, not raised.
          def enqueued?
            !job.respond_to?(:successfully_enqueued?) || job.successfully_enqueued? != false
          end

          # until_expired: a retry keeps the first enqueue's expiry.
          def keep_expiry? = false
        end
      end
    end
  end
end
