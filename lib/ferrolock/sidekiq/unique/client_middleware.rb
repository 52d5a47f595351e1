# frozen_string_literal: true

require_relative "middleware"
require_relative "push"
require_relative "on_conflict"
require_relative "resumption"
require_relative "../active_job_hooks"

# Fails at `chain.add` (which loads this file) on a Sidekiq version ferrolock does not support.
Ferrolock::Sidekiq::Compat.check!
Ferrolock::Sidekiq::ActiveJobHooks.install

module Ferrolock
  module Sidekiq
    module Unique
      # Sidekiq client middleware: enqueue-time uniqueness for job classes with a `lock:` option
      # (sidekiq-unique-jobs' names, see Unique::Settings). A push takes the digest's lock with the job's
      # jid as its value; a duplicate push finds it taken and meets on_conflict (default :log: not
      # pushed, one log line). A push of a job that already holds the lock (the same jid: a scheduled
      # job or a retry coming due, a reschedule) passes and refreshes it; so does the running job
      # enqueuing itself again to go on (same ActiveJob job_id, new jid: Unique::Resumption). Add it to
      # the client chain of clients AND servers (jobs push jobs), with Unique::ServerMiddleware in the
      # server chain:
      #
      #   Sidekiq.configure_client do |config|
      #     config.client_middleware { |chain| chain.add Ferrolock::Sidekiq::Unique::ClientMiddleware }
      #   end
      class ClientMiddleware
        include Unique::Middleware

        def call(job_class, job, _queue, _redis_pool = nil, &block)
          return yield if Backend.pass_through? # Ferrolock::Testing.disable!

          ActiveJobHooks.install

          klass, = Unique::Digest.class_and_args(job, job_class)
          settings = Unique::Settings.for(klass, job)
          return yield unless settings&.push_lock?

          lock, holder = take(settings, job, *Unique::Digest.with_legacy(settings, job))
          # Carried to the server middleware, which then releases this very lock (Unique::Digest.carried).
          job[Unique::Digest::PAYLOAD_KEY] = lock.digest
          return Unique::Push.pushed(lock, job, &block) unless holder
          if Unique::Resumption.resumes?(job, holder)
            return Unique::Resumption.pushed(settings, lock, job, holder, &block)
          end

          pushed = Unique::OnConflict.on_push(settings, lock, job, holder, &block)
          # Not pushed: an ActiveJob perform_later of this job ends as an aborted enqueue (ActiveJobHooks).
          ActiveJobHooks.skipped!(job) unless pushed
          pushed
        end

        private

        # [the lock, the jid holding it or nil when this job holds it now]. A lock held under the
        # legacy digest (pushed by a process still on the older digest rule, see
        # Unique::Digest.with_legacy) by another job meets on_conflict as the digest's own would; one
        # this job holds is freed (it takes the new one).
        def take(settings, job, digest, legacy)
          if legacy
            old = Unique::Lock.new(legacy, client: @client)
            holder = old.holder
            return [old, holder] if holder && holder != job["jid"]

            old.release(job["jid"]) if holder
          end
          lock = Unique::Lock.new(digest, client: @client)
          [lock, lock.take(job["jid"], Unique::Push.ttl(settings, job), keep: settings.lock == :until_expired)]
        end
      end
    end
  end
end
