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
            unlock(resource: lock_key)
            take_runtime_lock(runtime_lock_key, runtime_lock_ttl, on_runtime_conflict)
          end
        end
      end
    end
  end
end
