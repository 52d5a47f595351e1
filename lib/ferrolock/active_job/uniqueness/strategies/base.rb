# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # What every strategy shares (custom strategies in config.lock_strategies subclass it, as with
        # activejob-uniqueness): the job's lock key, lock_ttl (ms), conflict and Redis-error actions,
        # and ActiveJob callbacks that do nothing until a strategy overrides them.
        class Base
          attr_reader :lock_key, :lock_ttl, :on_conflict, :on_redis_connection_error, :job

          def initialize(job:)
            @job = job
            @lock_key = job.lock_key
            @lock_ttl = (job.lock_options[:lock_ttl] || config.lock_ttl).to_i * 1000 # ms
            @on_conflict = job.lock_options[:on_conflict] || config.on_conflict
            @on_redis_connection_error = job.lock_options[:on_redis_connection_error] ||
                                         config.on_redis_connection_error
          end

          def lock_manager = Uniqueness.lock_manager
          def config = Uniqueness.config

          # Takes resource for this job (its job_id is the token) for ttl ms; true when it holds it.
          # keep: a lock the job holds already keeps its expiry.
          def lock(resource:, ttl:, event: :lock, keep: false)
            return false if held_under_legacy_key?(resource)
            return false if lock_manager.take(resource, job.job_id, ttl / 1000.0, keep: keep)

            instrument(event, resource: resource, ttl: ttl)
            true
          end

          # Frees resource if this job holds it, or if the old gem's enqueue took it for this job
          # (see Ownership#release_for).
          def unlock(resource:, event: :unlock)
            legacy = job.lock_key_generator.legacy_of(resource)
            Ownership.release_for(job, legacy) if legacy
            Ownership.release_for(job, resource).tap { instrument(event, resource: resource) }
          end

          def before_enqueue; end
          def before_perform; end
          def after_perform; end

          def around_enqueue(block)
            block.call
          end

          def around_perform(block)
            block.call
          end

          private

          # A job enqueued before the upgrade to ArgumentDigest's rule holds the resource's legacy
          # key (LockKey#legacy_lock_key): another job holding it is a conflict.
          def held_under_legacy_key?(resource)
            legacy = job.lock_key_generator.legacy_of(resource)
            holder = legacy && lock_manager.holder(legacy)
            !holder.nil? && holder != job.job_id
          end

          def handle_conflict(on_conflict:, resource:, event: :conflict)
            case on_conflict
            when :log then instrument(event, resource: resource)
            when :raise then raise_not_unique_job_error(resource: resource, event: event)
            else on_conflict.call(job)
            end
          end

          def handle_redis_connection_error(resource:, on_redis_connection_error:, error:)
            case on_redis_connection_error
            when :raise, nil then raise error
            else on_redis_connection_error.call(job, resource: resource, error: error)
            end
          end

          def abort_job
            @job_aborted = true
            throw(:abort)
          end

          def instrument(action, payload = {})
            ActiveSupport::Notifications.instrument("#{action}.active_job_uniqueness", payload.merge(job: job))
          end

          def raise_not_unique_job_error(resource:, event:)
            what = event == :runtime_conflict ? "Not unique runtime" : "Not unique"
            raise JobNotUnique, "#{what} #{job.class.name} (Job ID: #{job.job_id}) (Lock key: #{resource}) " \
                                "#{job.arguments.inspect}"
          end
        end
      end
    end
  end
end
