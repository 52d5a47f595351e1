# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # A lock held while the job performs: a lease of config.lease seconds (at most its ttl),
        # renewed every lease/3 in the background, so a job running longer than lock_ttl keeps it
        # and a killed process frees it after one lease. Freed when perform_now ends, even when it
        # raised; kept (for ttl again) when the job enqueued itself meanwhile (retry_on, a
        # continuation's resumption), so that run finds its own lock and no duplicate gets between.
        module Running
          def around_perform(block)
            return block.call if @job_aborted

            hold_while_performing(@runtime_resource, @runtime_ttl, event: :runtime_unlock) { block.call }
          end

          private

          # Takes the runtime lock as the job starts (around_perform then holds it while it performs);
          # a duplicate running meanwhile is a runtime conflict and the job is not performed.
          def take_runtime_lock(resource, ttl_ms, on_conflict)
            @job_aborted = false
            @runtime_resource = resource
            @runtime_ttl = ttl_ms
            return if lock(resource: resource, ttl: lease_for(ttl_ms) * 1000, event: :runtime_lock)

            handle_conflict(on_conflict: on_conflict, resource: resource, event: :runtime_conflict)
            abort_job
          end

          def lease_for(ttl_ms)
            [ttl_ms / 1000.0, config.lease].min
          end

          # Renews resource (held by the job now) while the job performs; frees or keeps it when its
          # perform_now ends (see Performing). A child forked inside the job leaves it to its parent.
          # keep_if_resumed: the enqueue lock (until_executed), which a resumption keeps; a runtime lock
          # is freed, and its resumption takes it again when it runs.
          def hold_while_performing(resource, ttl_ms, event:, keep_if_resumed: false)
            token = job.job_id
            pid = Process.pid
            lock_manager.hold(resource, token, lease_for(ttl_ms))
            ended = lambda do |resumed|
              settle(resource, token, ttl_ms, keep_if_resumed && resumed, event) if Process.pid == pid
            end
            performing = Performing.of(job)
            performing&.on_end(&ended)
            begin
              yield
            ensure
              # (No perform_now around this perform: settled now, under no interrupt.)
              Thread.handle_interrupt(Object => :never) { ended.call(false) } unless performing
            end
          end

          def settle(resource, token, ttl_ms, keep, event)
            lock_manager.drop(resource, token)
            if keep
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
