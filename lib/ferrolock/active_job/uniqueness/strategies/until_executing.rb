# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # Locked when enqueued, unlocked as the job starts.
        class UntilExecuting < Base
          include LockingOnEnqueue

          def before_perform
            unlock(resource: lock_key)
          end
        end
      end
    end
  end
end
