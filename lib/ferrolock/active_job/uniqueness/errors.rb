# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      # activejob-uniqueness' errors, under its names (ActiveJob::Uniqueness::JobNotUnique …).
      class Error < ::RuntimeError; end

      # `unique :no_such_strategy`.
      class StrategyNotFound < Error; end

      # A duplicate enqueued (or run) with on_conflict: :raise.
      class JobNotUnique < Error; end

      # on_conflict:/on_runtime_conflict:/on_redis_connection_error: neither a known action nor callable.
      class InvalidOnConflictAction < Error; end
    end
  end
end
