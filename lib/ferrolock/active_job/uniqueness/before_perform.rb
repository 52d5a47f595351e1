# frozen_string_literal: true

require "English"

module Ferrolock
  module ActiveJob
    module Uniqueness
      # A job that fails before it performs (a record deleted while it queued: DeserializationError; its
      # class missing in this worker: NameError; a callback that halted first) never reaches the
      # strategy that frees its enqueue lock, which would then block its duplicates for lock_ttl (a day
      # by default). The payload carries that lock's key (Ownership::MARK); ActiveJob::Base.execute, the
      # one entry every adapter's worker uses, is wrapped, and when it ends before the job's perform
      # callbacks began the lock is freed (token-checked: only while this job_id holds it). The error
      # goes on to the adapter as without ferrolock. (limits_concurrency's slots have their own.)
      module BeforePerform
        CURRENT = :ferrolock_unique_before_perform
        private_constant :CURRENT

        # The job_id whose execute runs on this fiber, and whether its perform callbacks began.
        Run = Struct.new(:job_id, :started)
        private_constant :Run

        # Wraps ActiveJob::Base.execute.
        module Execute
          def execute(job_data)
            BeforePerform.around(job_data) { super }
          end
        end

        module_function

        def install(base)
          base.singleton_class.prepend(Execute) unless base.singleton_class.include?(Execute)
        end

        # Called as the job's perform callbacks begin: from there its strategy frees or keeps the lock.
        def started(job)
          run = Thread.current[CURRENT]
          run.started = true if run && run.job_id == job.job_id
        end

        def around(job_data)
          key = job_data[Ownership::MARK] if job_data.is_a?(Hash) && job_data["job_id"].is_a?(String)
          return yield unless key.is_a?(String)

          run = Run.new(job_data["job_id"], false)
          outer = Thread.current[CURRENT]
          Thread.current[CURRENT] = run
          begin
            yield
          ensure
            Thread.current[CURRENT] = outer
            failed(job_data, key, $ERROR_INFO) unless run.started
          end
        end

        def failed(job_data, key, error)
          job = "#{job_data["job_class"]} #{job_data["job_id"]}"
          why = error ? "#{error.class}: #{error.message}" : "its perform never began"
          freed = Uniqueness.lock_manager.release(key, job_data["job_id"])
          Ferrolock.logger.warn("ferrolock: #{job} failed before it performed (#{why}); its uniqueness lock #{key} " \
                                "#{freed ? "is freed" : "was not held by it any more"}")
        rescue Ferrolock::Error => e
          Ferrolock.logger.warn("ferrolock: #{job} failed before it performed (#{why}); its uniqueness lock #{key} " \
                                "could not be freed (#{e.class}: #{e.message}): it expires with lock_ttl")
        end
      end
    end
  end
end
