# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # Locked as the job starts, unlocked when it ends: one runs at a time per key. A duplicate
        # starting meanwhile is a runtime conflict (on_conflict), not performed.
        class WhileExecuting < Base
          include Running

          def before_perform
            @job_aborted = false
            return if lock(resource: lock_key, ttl: lease_for(lock_ttl) * 1000, event: :runtime_lock)

            handle_conflict(resource: lock_key, event: :runtime_conflict, on_conflict: on_conflict)
            abort_job
          end

          def around_perform(block)
            return block.call if @job_aborted

            hold_while_performing(lock_key, lock_ttl, event: :runtime_unlock) { block.call }
          end
        end
      end
    end
  end
end
