# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # Locked when enqueued; no duplicate is enqueued until the lock expires (lock_ttl).
        class UntilExpired < Base
          include LockingOnEnqueue

          private

          def keep_expiry? = true
        end
      end
    end
  end
end
