# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      # A job that fails before it performs (a record deleted while it queued: DeserializationError; its
      # class missing in this worker: NameError; a callback that halted first) never reaches the
      # strategy that frees its enqueue lock, which would then block its duplicates for lock_ttl (a day
      # by default). The payload carries that lock's key (Ownership::MARK); this is the handler that
      # Ferrolock::ActiveJob::BeforePerform (the one wrapper of ActiveJob::Base.execute) calls when the
      # job's perform callbacks never began: the lock is freed, token-checked (only while this job_id
      # holds it). The error goes on to the adapter as without ferrolock.
      module BeforePerform
        FEATURE = :uniqueness

        module_function

        def install(base)
          ActiveJob::BeforePerform.register(FEATURE, self)
          ActiveJob::BeforePerform.install
          base.before_perform { |job| ActiveJob::BeforePerform.started(job, FEATURE) }
        end

        # The enqueue lock's key the payload carries (nil: none to free).
        def held(job_data)
          key = job_data[Ownership::MARK]
          key if key.is_a?(String)
        end

        def failed(job_data, key, _error, why)
          job = "#{job_data["job_class"]} #{job_data["job_id"]}"
          freed = Uniqueness.lock_manager.release(key, job_data["job_id"])
          Ferrolock.log(:warn, "ferrolock: #{job} failed before it performed (#{why}); its uniqueness lock #{key} " \
                               "#{freed ? "is freed" : "was not held by it any more"}")
        rescue Ferrolock::Error => e
          Ferrolock.log(:warn, "ferrolock: #{job} failed before it performed (#{why}); its uniqueness lock #{key} " \
                               "could not be freed (#{e.class}: #{e.message}): it expires with lock_ttl")
        end
      end
    end
  end
end
