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
    # Sidekiq client middleware: enqueue-time uniqueness for job classes with a `lock:` option
    # (sidekiq-unique-jobs' names, see UniqueSettings). A push takes the digest's lock with the job's
    # jid as its value; a duplicate push finds it taken and meets on_conflict (default :log: not
    # pushed, one log line). A push of a job that already holds the lock (the same jid: a scheduled
    # job or a retry coming due, a reschedule) passes and refreshes it; so does the running job
    # enqueuing itself again to go on (same ActiveJob job_id, new jid: UniqueResumption). Add it to
    # the client chain of clients AND servers (jobs push jobs), with UniqueServerMiddleware in the
    # server chain:
    #
    #   Sidekiq.configure_client do |config|
    #     config.client_middleware { |chain| chain.add Ferrolock::Sidekiq::UniqueClientMiddleware }
    #   end
    class UniqueClientMiddleware
      include UniqueMiddleware

      def call(job_class, job, _queue, _redis_pool = nil, &block)
        return yield if Backend.pass_through? # Ferrolock::Testing.disable!

        ActiveJobHooks.install

        klass, = UniqueDigest.class_and_args(job, job_class)
        settings = UniqueSettings.for(klass, job)
        return yield unless settings&.push_lock?

        digest = UniqueDigest.for(settings, job)
        # Carried to the server middleware, which then releases this very lock (UniqueDigest.carried).
        job[UniqueDigest::PAYLOAD_KEY] = digest
        lock = UniqueLock.new(digest, client: @client)
        holder = lock.take(job["jid"], UniquePush.ttl(settings, job), keep: settings.lock == :until_expired)
        return UniquePush.pushed(lock, job, &block) unless holder
        return UniqueResumption.pushed(settings, lock, job, holder, &block) if UniqueResumption.resumes?(job, holder)

        pushed = UniqueOnConflict.on_push(settings, lock, job, holder, &block)
        # Not pushed: an ActiveJob perform_later of this job ends as an aborted enqueue (ActiveJobHooks).
        ActiveJobHooks.skipped!(job) unless pushed
        pushed
      end
    end
  end
end
