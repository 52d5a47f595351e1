# frozen_string_literal: true

require_relative "../running_job"
require_relative "leases"
require_relative "push"

module Ferrolock
  module Sidekiq
    module Unique
      # A job that enqueues itself again to go on later: an interrupted Rails 8.1 continuation
      # (ActiveJob::Continuable resumes by retry_job, at a checkpoint while Sidekiq stops, after an
      # isolated step, or after an error once it advanced), ActiveJob's retry_on, an explicit retry_job.
      # That push carries the same ActiveJob job_id under a new jid, and is made on the fiber that runs
      # the job. It is the same job going on: the lock its running jid holds passes to the new jid
      # (token-checked, Unique::Lock#hand_over) instead of the push meeting on_conflict as a duplicate and
      # being dropped while the running job then finishes and frees the lock. A new perform_later with
      # the same arguments has a new job_id: still a duplicate.
      module Resumption
        module_function

        # Whether pushing `job` resumes the job running on this fiber (RunningJob), which holds the lock
        # (`holder`).
        def resumes?(job, holder)
          !holder.nil? && RunningJob.resumed_jid(job) == holder
        end

        # Pushes (yield) with the lock passed from `holder` to the job's new jid; hands it back (and its
        # renewal) when the push did not happen, so the running job's retry still finds its lock.
        def pushed(settings, lock, job, holder)
          jid = job["jid"]
          return nil unless lock.hand_over(holder, jid, Unique::Push.ttl(settings, job))

          renewed = Unique::Leases.drop(lock, holder)
          Ferrolock.log(:info, "ferrolock: #{Sidekiq.job_label(job, settings.class_name)} resumes #{holder}: " \
                               "unique lock #{lock.digest.inspect} passed on (lock: #{settings.lock})")
          result = nil
          begin
            result = yield
          ensure
            hand_back(lock, jid, holder, renewed ? renewed.lease : settings.ttl, renewed) unless result
          end
        end

        def hand_back(lock, jid, holder, ttl, renewed)
          lock.hand_over(jid, holder, ttl) && renewed && Unique::Leases.hold(lock, holder, renewed.lease)
        end
      end
    end
  end
end
