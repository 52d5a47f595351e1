# frozen_string_literal: true

require "English"
require_relative "middleware"
require_relative "leases"
require_relative "retry"
require_relative "on_conflict"
require_relative "../running_job"

# Fails at `chain.add` (which loads this file) on a Sidekiq version ferrolock does not support.
Ferrolock::Sidekiq::Compat.check!

module Ferrolock
  module Sidekiq
    module Unique
      # Sidekiq server middleware: the run-time side of the `lock:` types (see the README's table).
      #   until_executing            releases the push-time lock as the job starts
      #   until_executed             turns it into a lease renewed while the job runs; released on success,
      #                              kept for the retry on failure, released when the job dies
      #   until_expired              leaves it to expire (ttl)
      #   while_executing            runs inside a DistMutex on the digest (lease-based), waiting up to
      #                              wait_timeout for a running duplicate, then on_conflict (default
      #                              :reschedule)
      #   until_and_while_executing  releases the push-time lock and runs through a DualLock on the digest
      #                              (one runs, one waits, a further one is skipped: no update is lost)
      #
      #   Sidekiq.configure_server do |config|
      #     config.client_middleware { |chain| chain.add Ferrolock::Sidekiq::Unique::ClientMiddleware }
      #     config.server_middleware { |chain| chain.add Ferrolock::Sidekiq::Unique::ServerMiddleware }
      #   end
      class ServerMiddleware
        include Unique::Middleware

        # How often until_and_while_executing looks whether the other rule's duplicate still runs.
        OTHER_RULE_POLL = 0.05
        private_constant :OTHER_RULE_POLL

        # Checks job classes' uniqueness options now, at boot, raising what their first push would
        # (the Railtie runs it on Sidekiq's :startup when this middleware is in the server chain). With
        # no classes given: every loaded class with a `lock` option, or with a sidekiq-unique-jobs
        # option ferrolock refuses (eager-load first).
        def self.validate!(*job_classes)
          job_classes = JobClasses.with_option("lock") | Unique::Unsupported.declaring_classes if job_classes.empty?
          JobClasses.check_all!(job_classes, "lock", "Unique::ServerMiddleware.validate!") do |job_class|
            case job_class
            when Module then Unique::Settings.for(job_class, {})
            else raise TypeError,
                       "Unique::ServerMiddleware.validate! takes job classes, got #{Validate.show(job_class)}"
            end
          end
        end

        def call(worker, job, queue, &block)
          return yield if Backend.pass_through? # Ferrolock::Testing.disable!

          # Every job, locked or not: the client middlewares tell its resumptions from new jobs by it.
          RunningJob.running(job) { run(worker, job, queue, &block) }
        end

        private

        def run(worker, job, queue, &block)
          klass, = Unique::Digest.class_and_args(job, worker.class)
          settings = Unique::Settings.for(klass, job)
          return yield unless settings

          digest = Unique::Digest.carried(settings, job)
          case settings.lock
          when :until_executing then until_executing(digest, job, &block)
          when :until_executed then until_executed(settings, digest, job, &block)
          when :while_executing then while_executing(settings, digest, job, queue, &block)
          when :until_and_while_executing then until_and_while_executing(settings, digest, job, queue, &block)
          else yield # until_expired
          end
        end

        def until_executing(digest, job)
          Unique::Lock.new(digest, client: @client).release(job["jid"])
          yield
        end

        # The push-time lock becomes a lease: a killed worker frees it after lease, not ttl.
        # A job whose lock expired before it ran takes it again if free; if a duplicate took it
        # meanwhile (it was pushed after ttl), both run: the job is not dropped.
        def until_executed(settings, digest, job)
          lock = Unique::Lock.new(digest, client: @client)
          holder = lock.take(job["jid"], settings.lease)
          if holder
            label = Sidekiq.job_label(job, settings.class_name)
            Ferrolock.log(:info, "ferrolock: #{label} runs while its duplicate " \
                                 "#{holder} holds #{digest.inspect} (pushed after this job's ttl passed)")
            return yield
          end

          finished = false
          pid = Process.pid
          job.delete(Reschedule::MARK) # (a stale one, from a payload retried after a reschedule)
          Unique::Leases.hold(lock, job["jid"], settings.lease)
          begin
            result = yield
            finished = true
            result
          ensure
            # No interrupt (Sidekiq's hard shutdown is a Thread#raise) may skip this. A child forked
            # inside the job leaves it too: the lock is its parent's to release.
            settle_once = proc { settle(settings, lock, job, finished, $ERROR_INFO) }
            Thread.handle_interrupt(Object => :never, &settle_once) if Process.pid == pid
          end
        end

        # Releases (success) or keeps for the retry (failure). Redis failing here is only reported:
        # raising would retry a job that succeeded, or hide the job's own exception; the lock, no longer
        # renewed, expires after its lease (see ReleaseFailure).
        def settle(settings, lock, job, finished, error)
          Unique::Leases.drop(lock, job["jid"])
          finished ? release_or_keep(settings, lock, job) : Unique::Retry.keep_or_release(settings, lock, job, error)
        rescue Ferrolock::Error => e
          ReleaseFailure.report(e, what: "unique lock #{lock.digest.inspect} of #{job["jid"]}", finished: finished,
                                   primitive: :unique, digest: lock.digest, class: settings.class_name, jid: job["jid"])
        end

        # A run that ended as a reschedule (a limiter or DualLock middleware inside this one pushed the
        # job again for later) has not done the job: its lock stays, as a scheduled job's, until ttl
        # after it is due; else a duplicate pushed meanwhile would run too.
        def release_or_keep(settings, lock, job)
          at = job.delete(Reschedule::MARK)
          return lock.release(job["jid"]) if at.nil?

          lock.expire(job["jid"], Unique::Push.ttl(settings, { "at" => at }))
        end

        def while_executing(settings, digest, job, queue)
          mutex = DistMutex.new(InternalName.new("#{digest}:run"), lease: settings.lease, client: @client)
          got = settings.wait_timeout.zero? ? mutex.try_lock : try_lock(mutex, settings.wait_timeout)
          got &&= !running_under_other_rule?(settings, digest, job, mutex)
          return Unique::OnConflict.on_run(settings, mutex.name, job, queue) unless got

          finished = false
          begin
            result = yield
            finished = true
            result
          ensure
            unlock(mutex, job, finished)
          end
        end

        # During a rolling deploy a duplicate may run under the digest of the other argument rule
        # (Unique::Digest.with_legacy): its run lock held there is a conflict too (ours is given back).
        def running_under_other_rule?(settings, digest, job, mutex)
          other = other_rule_digest(settings, digest, job)
          return false unless other && DistMutex.new(InternalName.new("#{other}:run"), client: @client).locked?

          mutex.unlock
          true
        end

        # until_and_while_executing's side of the same: holding our DualLock's turn, the job waits (up
        # to wait_timeout, then TimeoutError: on_conflict) while a duplicate runs under the other rule's
        # DualLock. It polls: only a mixed fleet meets it, and the older process signals its own key.
        def wait_for_other_rule(settings, digest, job)
          other = other_rule_digest(settings, digest, job)
          return unless other

          running = Ferrolock::DualLock.new(InternalName.new("#{other}:run"), client: @client)
          deadline = Ferrolock.monotonic + (settings.wait_timeout || Float::INFINITY)
          while running.executing?
            raise Ferrolock::TimeoutError, "a duplicate runs under #{other.inspect}" if Ferrolock.monotonic >= deadline

            sleep OTHER_RULE_POLL
          end
        end

        def other_rule_digest(settings, digest, job)
          Unique::Digest.with_legacy(settings, job).compact.find { |name| name != digest }
        end

        def try_lock(mutex, timeout)
          mutex.lock(wait_timeout: timeout)
          true
        rescue Ferrolock::TimeoutError
          false
        end

        # A child forked inside the job does not own the mutex (DistMutex forgets its parent's holds).
        # Neither a lost lease nor a failed release fails the job: it has run (or raised its own error),
        # and failing it now would only run it again.
        def unlock(mutex, job, finished)
          mutex.unlock if mutex.owned?
        rescue Ferrolock::LockLost => e
          Ferrolock.log(:warn, "ferrolock: #{Sidekiq.job_label(job)} ran without exclusivity: " \
                               "#{e.message}")
        rescue Ferrolock::Error => e
          ReleaseFailure.report(e, what: "DistMutex #{mutex.name.inspect}", finished: finished,
                                   primitive: :dist_mutex, name: mutex.name, class: Sidekiq.job_class_name(job),
                                   jid: job["jid"])
        end

        def until_and_while_executing(settings, digest, job, queue)
          Unique::Lock.new(digest, client: @client).release(job["jid"])
          lease = settings.lease
          dual = Ferrolock::DualLock.new(InternalName.new("#{digest}:run"),
                                         lease: lease, wait_lease: lease, wait_timeout: settings.wait_timeout,
                                         client: @client)
          entered = false
          ran = dual.run(tags: { class: settings.class_name, jid: job["jid"], queue: queue }) do
            wait_for_other_rule(settings, digest, job)
            entered = true
            yield
          end
          Unique::OnConflict.log_skip(settings, dual.key, job, "run") unless ran
        rescue Ferrolock::TimeoutError
          raise if entered

          Unique::OnConflict.on_run(settings, dual.key, job, queue)
        end
      end
    end
  end
end
