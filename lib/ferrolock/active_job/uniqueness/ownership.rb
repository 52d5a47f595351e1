# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      # Whose lock a job's lock is. ferrolock takes a job's lock with its job_id as the token and
      # marks the payload (MARK); a job read from a queue without the mark was enqueued by
      # activejob-uniqueness (a rolling deploy), whose lock holds Redlock's random value: that one is
      # released as the old gem would (by key), but only while that value still holds it.
      module Ownership
        MARK = "ferrolock_unique"

        class << self
          def enqueued_by_old_gem?(job)
            job.instance_variable_get(:@ferrolock_unique_unmarked) == true
          end

          # True when the job held resource (or the old gem took it for this job) and it is free now.
          def release_for(job, resource)
            manager = Uniqueness.lock_manager
            return true if manager.release(resource, job.job_id)
            return false unless enqueued_by_old_gem?(job)

            holder = manager.holder(resource)
            holder ? manager.release_value(resource, holder) : false
          end

          # Takes resource for the job for ttl seconds as it starts (a lock the old gem took for it is
          # handed to its job_id); the value of another job holding it, else nil.
          def take_over(job, resource, ttl)
            manager = Uniqueness.lock_manager
            holder = manager.take(resource, job.job_id, ttl)
            return nil if holder.nil?
            return holder unless enqueued_by_old_gem?(job)

            manager.hand_over(resource, holder, job.job_id, ttl) ? nil : manager.holder(resource)
          end
        end

        # Prepended to ActiveJob::Base with the `unique` macro: the mark in and out of the payload.
        module Payload
          # The mark is the enqueue lock's key when the job's perform frees it (see BeforePerform).
          def serialize
            data = super
            strategy = self.class.lock_strategy_class
            return data unless strategy

            frees = strategy.include?(Strategies::LockingOnEnqueue) && !(strategy <= Strategies::UntilExpired)
            data.merge(MARK => frees ? lock_key : true)
          end

          def deserialize(job_data)
            super
            @ferrolock_unique_unmarked = !job_data.key?(MARK)
          end
        end
      end
    end
  end
end
