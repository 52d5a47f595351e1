# frozen_string_literal: true

require "active_job"
require "ferrolock"
require_relative "uniqueness/configuration"
require_relative "uniqueness/lock_key"
require_relative "uniqueness/key_lock"
require_relative "uniqueness/lock_manager"
require_relative "uniqueness/test_lock_manager"
require_relative "uniqueness/ownership"
require_relative "before_perform"
require_relative "uniqueness/before_perform"
require_relative "uniqueness/strategies"
require_relative "uniqueness/job_patch"
require_relative "uniqueness/log_subscriber"

module Ferrolock
  module ActiveJob
    # A drop-in for the activejob-uniqueness gem (0.4) on any ActiveJob adapter: its API under its
    # own names once `require "active_job/uniqueness"` (which makes ActiveJob::Uniqueness this
    # module), its Redis keys, events and log lines. See doc/ACTIVE_JOB.md.
    module Uniqueness
      VERSION = "0.4.0" # the activejob-uniqueness API this implements

      # activejob-uniqueness' errors, under its names (ActiveJob::Uniqueness::JobNotUnique …).
      class Error < ::RuntimeError; end

      # `unique :no_such_strategy`.
      class StrategyNotFound < Error; end

      # A duplicate enqueued (or run) with on_conflict: :raise.
      class JobNotUnique < Error; end

      # on_conflict:/on_runtime_conflict:/on_redis_connection_error: neither a known action nor callable.
      class InvalidOnConflictAction < Error; end

      class << self
        def configure
          yield config
        end

        def config
          @config ||= Configuration.new
        end

        def lock_manager
          @lock_manager ||= LockManager.new
        end

        # Deletes the locks of a class (job_class_name:) or of one job's arguments (and arguments:),
        # whoever holds them; with neither, every lock under lock_prefix.
        def unlock!(**args)
          key = LockKey.new(**args)
          # (and those under the key before ArgumentDigest's rule, see LockKey#legacy_lock_key)
          legacy = key.legacy_lock_key
          lock_manager.delete_locks("#{legacy}*") if legacy
          lock_manager.delete_locks(key.wildcard_key)
        end

        # Every lock granted, nothing stored (for an app's tests).
        def test_mode!
          @lock_manager = TestLockManager.new
        end

        # Back to Redis (and to config.client as it is now).
        def reset_manager!
          @lock_manager = nil
        end
      end

      LogSubscriber.attach_to(:active_job_uniqueness)
      ActiveSupport.on_load(:active_job) { include JobPatch unless include?(JobPatch) }
    end
  end
end
