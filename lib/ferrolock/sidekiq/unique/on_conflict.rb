# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    module Unique
      # What happens to a duplicate (sidekiq-unique-jobs' on_conflict strategies). Client side: a push
      # whose digest another job holds; server side: a run that found a duplicate running for longer
      # than wait_timeout.
      module OnConflict
        COUNTER = "ferrolock_unique_reschedules"

        module_function

        # The push's result: nil (the push is dropped) or what yield returns (the job is pushed).
        def on_push(settings, lock, job, holder, &push)
          case settings.client_conflict
          when :raise then raise conflict_error(settings, lock.digest, job, holder)
          when :reject then reject(settings, lock, job, holder, "push")
          when :replace then replace(settings, lock, job, holder, &push)
          when :reschedule then push_later(settings, lock, job, holder, &push)
          else dropped(settings, lock, job, holder)
          end
        end

        # After a run did not get its lock: nothing else happens to the job (it finishes).
        def on_run(settings, lock_name, job, queue)
          case settings.server_conflict
          when :raise then raise conflict_error(settings, lock_name, job, nil)
          when :reject then reject_run(settings, lock_name, job)
          when :log then log_skip(settings, lock_name, job, "run")
          else reschedule_run(settings, lock_name, job, queue)
          end
        end

        def conflict_error(settings, digest, job, holder)
          Ferrolock::UniqueConflict.new(
            "#{label(settings, job)}: a duplicate (#{holder || "running"}) holds unique lock " \
            "#{digest.inspect} (lock: #{settings.lock})", digest: digest, job_class: settings.class_name
          )
        end

        def dropped(settings, lock, job, holder)
          log_skip(settings, lock.digest, job, "push", holder)
          nil
        end

        def log_skip(settings, digest, job, where, holder = nil)
          held_by = holder ? " held by #{holder}" : ""
          Ferrolock.log(:info, "ferrolock: #{label(settings, job)} #{where} skipped: unique lock " \
                               "#{digest.inspect}#{held_by} (lock: #{settings.lock})")
          Ferrolock.instrument(:skipped, primitive: :unique, key: digest, reason: :duplicate, side: where,
                                         class: settings.class_name, jid: job["jid"], holder: holder)
        end

        # The duplicate goes to the dead set (visible and retryable from the Web UI), not to the queue.
        def reject(settings, lock, job, holder, where)
          log_skip(settings, lock.digest, job, where, holder)
          dead_set.kill(::Sidekiq.dump_json(job), notify_failure: false)
          nil
        end

        def reject_run(settings, lock_name, job)
          log_skip(settings, lock_name, job, "run")
          dead_set.kill(::Sidekiq.dump_json(job), notify_failure: false)
        end

        # Deletes the queued or scheduled job holding the lock, then pushes this one holding it. A holder
        # that already runs (or is in the retry set) cannot be replaced: the push is then dropped.
        def replace(settings, lock, job, holder, &push)
          if delete_waiting(holder, job["queue"]) && lock.hand_over(holder, job["jid"], Unique::Push.ttl(settings, job))
            Ferrolock.log(:info, "ferrolock: #{label(settings, job)} replaced #{holder} " \
                                 "(unique lock #{lock.digest.inspect})")
            return Unique::Push.pushed(lock, job, &push)
          end
          dropped(settings, lock, job, holder)
        end

        def delete_waiting(jid, queue)
          require "sidekiq/api"
          [::Sidekiq::ScheduledSet.new, ::Sidekiq::Queue.new(queue.to_s)].any? do |place|
            found = place.find_job(jid)
            found&.delete
          end
        end

        # Pushes the job as a scheduled one instead (it takes the lock when it comes back if free).
        def push_later(settings, lock, job, holder)
          count = job.fetch(COUNTER, 0).to_i + 1
          delay = Reschedule.backoff(count)
          job[COUNTER] = count
          job["at"] = Time.now.to_f + delay
          Ferrolock.log(:info, "ferrolock: #{label(settings, job)} has a duplicate (#{holder}) holding " \
                               "unique lock #{lock.digest.inspect}; #{Reschedule.due(delay)}")
          Ferrolock.instrument(:rescheduled, primitive: :unique, key: lock.digest, reason: :duplicate,
                                             class: settings.class_name, jid: job["jid"], count: count, delay: delay)
          yield
        end

        def reschedule_run(settings, lock_name, job, queue)
          count = job.fetch(COUNTER, 0).to_i + 1
          delay = Reschedule.backoff(count)
          Reschedule.call(job, delay: delay, counter: COUNTER)
          Ferrolock.log(:info, "ferrolock: #{label(settings, job)} found a duplicate running " \
                               "(#{lock_name.inspect}); #{Reschedule.due(delay)} (#{count} so far)")
          Ferrolock.instrument(:rescheduled, primitive: :unique, key: lock_name, reason: :duplicate_running,
                                             class: settings.class_name, jid: job["jid"], queue: queue,
                                             count: count, delay: delay)
        end

        def label(settings, job)
          Sidekiq.job_label(job, settings.class_name)
        end

        def dead_set
          require "sidekiq/api"
          ::Sidekiq::DeadSet.new
        end
      end
    end
  end
end
