# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      # ActiveJob::Uniqueness.test_mode!: every lock is granted, nothing is stored.
      class TestLockManager
        def lock(*) = true
        def take(*, **) = nil
        def release(*) = true
        def release_value(*) = true
        def expire(*) = true
        def hand_over(*) = true
        def holder(*) = nil
        def hold(*) = nil
        def drop(*) = nil
        def delete_lock(*) = true
        def delete_locks(*) = true
      end
    end
  end
end
