# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    module Unique
      # After an until_executed job failed: the lock is kept for its retry (same jid, so the retry's
      # push finds its own lock), or released when Sidekiq will not retry it (retry: false, or retries
      # exhausted: the job goes to the dead set, and a new push must be possible) or when the job
      # failed before it performed (an ActiveJob job that cannot be deserialized or loaded here).
      module Retry
        DEFAULT_MAX_RETRIES = 25

        module_function

        def keep_or_release(settings, lock, job, error)
          jid = job["jid"]
          if shutdown?(error) || interrupted?(error)
            # Sidekiq pushes the job back to its queue: it is a queued job again.
            lock.expire(jid, settings.ttl)
          elsif never_performs?(job, error)
            before_perform(settings, lock, job, error)
          elsif retried?(job)
            lock.expire(jid, settings.ttl + longest_retry_delay(job))
          else
            lock.release(jid)
          end
        rescue Ferrolock::Error => e
          # The lock still expires by itself (one lease); the job's own error goes on.
          ReleaseFailure.report(e, what: "unique lock #{lock.digest.inspect} of job #{jid}", finished: false,
                                   primitive: :unique, digest: lock.digest, class: settings.class_name, jid: jid)
        end

        # An ActiveJob job that failed before it performed: its arguments cannot be deserialized (a
        # record deleted), or its class is missing here. Its retries fail alike, so it holds the lock
        # no longer (as BeforePerform gives back a limits_concurrency slot); a new push may run.
        def never_performs?(job, error)
          return false unless Unique::Digest.active_job?(job)
          return true if Object.const_defined?("ActiveJob::DeserializationError", false) &&
                         error.is_a?(::ActiveJob::DeserializationError)

          error.is_a?(NameError) && !Unique::Digest.class_and_args(job).first.is_a?(Module)
        end

        def before_perform(settings, lock, job, error)
          jid = job["jid"]
          lock.release(jid)
          label = Sidekiq.job_label(job, settings.class_name)
          Ferrolock.log(:warn, "ferrolock: #{label} failed before it performed " \
                               "(#{error.class}: #{error.message}); its unique lock #{lock.digest.inspect} is " \
                               "released")
          Ferrolock.instrument(:failed_before_perform, primitive: :unique, digest: lock.digest,
                                                       class: settings.class_name, jid: jid, error: error.class.name)
        end

        # Sidekiq::Shutdown (a hard stop), or nil: Thread#kill.
        def shutdown?(error)
          error.nil? || (defined?(::Sidekiq::Shutdown) && error.is_a?(::Sidekiq::Shutdown))
        end

        # An iterable job (Sidekiq 7.3+) stopped between two items: Sidekiq's InterruptHandler pushes it
        # back with its cursor saved, without counting a retry.
        def interrupted?(error)
          defined?(::Sidekiq::Job::Interrupted) && error.is_a?(::Sidekiq::Job::Interrupted)
        end

        # Whether Sidekiq's retry handler will put the job in the retry set (the count it gives the
        # retry is retry_count + 1, or 0 for the first failure).
        def retried?(job)
          attempts = job.fetch("retry", true)
          attempts = true if attempts.nil?
          max = attempts == true ? max_retries : attempts.to_i
          next_count = job["retry_count"] ? job["retry_count"].to_i + 1 : 0
          attempts != false && next_count < max
        end

        # Sidekiq's default retry delay for the coming retry, at its longest: count**4 + 15 +
        # rand(10) * (count + 1). (A sidekiq_retry_in block longer than that lets a duplicate through.)
        def longest_retry_delay(job)
          count = job["retry_count"] ? job["retry_count"].to_i + 1 : 0
          (count**4) + 15 + (9 * (count + 1))
        end

        def max_retries
          config = ::Sidekiq.respond_to?(:default_configuration) ? ::Sidekiq.default_configuration : ::Sidekiq.options
          (config[:max_retries] || DEFAULT_MAX_RETRIES).to_i
        rescue NoMethodError # a Sidekiq without either config API (not an outer timeout: that must go on)
          DEFAULT_MAX_RETRIES
        end
      end
    end
  end
end
