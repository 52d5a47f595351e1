# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # Locked when enqueued, unlocked when the perform ends (also when it raised: the old gem kept
        # the lock until lock_ttl then). While the job runs the lock is a renewed lease (see Running).
        # A job whose lock expired while it queued takes it again if free; if a duplicate holds it
        # now, the job runs (it is not dropped) and leaves that lock alone.
        class UntilExecuted < Base
          include LockingOnEnqueue
          include Running

          def holds_lock_while_performing? = true

          def around_perform(block)
            holder = Ownership.take_over(job, lock_key, lease_for(lock_ttl))
            if holder.nil?
              return hold_while_performing(lock_key, lock_ttl, event: :unlock, keep_if_resumed: true) { block.call }
            end

            job.logger&.info("#{job.class.name} (Job ID: #{job.job_id}) runs while a duplicate holds " \
                             "#{lock_key} (its lock expired while it queued)")
            block.call
          end
        end
      end
    end
  end
end
