# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    module Unique
      # The push-time side of a uniqueness lock.
      module Push
        module_function

        # How long a pushed job's lock lasts if nothing releases it: ttl after the job is due (a
        # scheduled job, `perform_in`, keeps its lock until it runs).
        def ttl(settings, job)
          settings.ttl + (due_at(job) - Time.now.to_f).clamp(0, MAX_SECONDS)
        end

        # When the job is due (epoch seconds): its "at", or now. Sidekiq refuses other "at" values
        # before middlewares run; checked here for direct callers (a BasicObject has no is_a?).
        def due_at(job)
          case (at = job["at"])
          when nil then Time.now.to_f
          when Numeric
            raise ArgumentError, "job at must be a finite timestamp, got #{at}" unless at.to_f.finite?

            at.to_f
          else raise TypeError, "job at must be a Numeric timestamp, got #{Validate.show(at)}"
          end
        end

        # Pushes (yield) holding lock; gives the lock back when the push did not happen (another
        # middleware stopped it, or Redis failed), so no lock outlives a job that was never queued.
        def pushed(lock, job)
          result = yield
          lock.release(job["jid"]) unless result
          result
        rescue StandardError
          lock.release(job["jid"])
          raise
        end
      end
    end
  end
end
