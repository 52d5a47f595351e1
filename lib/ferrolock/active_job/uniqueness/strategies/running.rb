# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # A lock held while the job performs: a lease of config.lease seconds (at most its ttl),
        # renewed every lease/3 in the background, so a job running longer than lock_ttl keeps it
        # and a killed process frees it after one lease. Freed when the perform ends, even when it
        # raised; kept (for ttl again) when the job enqueued itself meanwhile (retry_on, a
        # continuation's resumption), so that run finds its own lock.
        module Running
          private

          def lease_for(ttl_ms)
            [ttl_ms / 1000.0, config.lease].min
          end

          # Renews resource (held by the job now) while the block runs, then frees or keeps it.
          def hold_while_performing(resource, ttl_ms, event:)
            token = job.job_id
            pid = Process.pid
            lock_manager.hold(resource, token, lease_for(ttl_ms))
            Performing.during(job) do |performing|
              yield
            ensure
              settle = proc { settle(resource, token, ttl_ms, performing.resumed, event) }
              # No interrupt may skip this; a child forked inside the job leaves the lock to its parent.
              Thread.handle_interrupt(Object => :never, &settle) if Process.pid == pid
            end
          end

          def settle(resource, token, ttl_ms, resumed, event)
            lock_manager.drop(resource, token)
            if resumed
              lock_manager.expire(resource, token, ttl_ms / 1000.0)
            else
              unlock(resource: resource, event: event)
            end
          rescue Ferrolock::Error => e
            ReleaseFailure.report(e, what: "ActiveJob::Uniqueness lock #{resource} of #{token}", finished: true,
                                     primitive: :active_job_uniqueness, name: resource)
          end
        end
      end
    end
  end
end
