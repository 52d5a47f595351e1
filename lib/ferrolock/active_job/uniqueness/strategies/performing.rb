# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # A job's perform under way: whether the job enqueued itself again meanwhile (a retry_on
        # retry, a continuation's resumption). One object shared by the job and its copies
        # (ActiveJob 7.x's retry_job enqueues a dup).
        Performing = Struct.new(:resumed) do
          def self.of(job)
            job.instance_variable_get(:@ferrolock_unique_performing)
          end

          def self.during(job)
            performing = new(false)
            job.instance_variable_set(:@ferrolock_unique_performing, performing)
            yield performing
          ensure
            job.instance_variable_set(:@ferrolock_unique_performing, nil)
          end
        end
      end
    end
  end
end
