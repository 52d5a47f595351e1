# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # Locked when enqueued; as the job starts that lock is freed and a runtime lock
        # (`<lock_key>:runtime`, runtime_lock_ttl) is taken for the run: one waits, one runs per key.
        class UntilAndWhileExecuting < Base
          include LockingOnEnqueue
          include Running

          attr_reader :runtime_lock_key, :runtime_lock_ttl, :on_runtime_conflict

          def initialize(job:)
            super
            @runtime_lock_key = job.runtime_lock_key
            runtime_ttl = job.lock_options[:runtime_lock_ttl]
            @runtime_lock_ttl = runtime_ttl.nil? || runtime_ttl.to_s.empty? ? lock_ttl : runtime_ttl.to_i * 1000
            @on_runtime_conflict = job.lock_options[:on_runtime_conflict] || on_conflict
          end

          def before_perform
            @job_aborted = false
            unlock(resource: lock_key)
            ttl = lease_for(runtime_lock_ttl) * 1000
            return if lock(resource: runtime_lock_key, ttl: ttl, event: :runtime_lock)

            handle_conflict(on_conflict: on_runtime_conflict, resource: runtime_lock_key, event: :runtime_conflict)
            abort_job
          end

          def around_perform(block)
            return block.call if @job_aborted

            hold_while_performing(runtime_lock_key, runtime_lock_ttl, event: :runtime_unlock) { block.call }
          end
        end
      end
    end
  end
end
