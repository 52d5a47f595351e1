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
            take_runtime_lock(lock_key, lock_ttl, on_conflict)
          end
        end
      end
    end
  end
end
