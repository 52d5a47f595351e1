# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module DualLock
      # One perform through the class's DualLock: runs it, skips it (a duplicate waits already), or,
      # after waiting past wait_timeout, enqueues the job again for later (same job_id, counter
      # COUNTER in the payload; not a retry, never dropped).
      class Run
        def initialize(job)
          @job = job
        end

        def call(block)
          options = @job.class.ferrolock_dual_lock
          return block.call if options.nil? || Backend.pass_through?

          run(options, options.key_for(@job), block)
        end

        private

        def run(options, key, block)
          settings = options.settings
          lock = Ferrolock::DualLock.new(key, lease: settings.lease, wait_lease: settings.wait_lease,
                                              wait_timeout: settings.wait_timeout)
          entered = false
          ran = lock.run(tags: { class: @job.class.name, job_id: @job.job_id }) do
            entered = true
            block.call
          end
          skipped(key) unless ran
        rescue Ferrolock::TimeoutError => e
          raise if entered # the job's own timeout, not the wait

          reschedule(options, lock, key, e)
        rescue Ferrolock::LockLost => e
          raise unless entered

          # The job has run; failing it now would only run it again. The :lock_lost event is out.
          log(:warn, "ran without exclusivity: #{e.message}")
        end

        def skipped(key)
          log(:info, "skipped: a duplicate already waits to run after the current one (dual_lock key #{key.inspect})")
        end

        def reschedule(options, lock, key, error)
          count = @job.ferrolock_dual_lock_waits + 1
          delay = delay_for(options.backoff, count, lock, error)
          @job.ferrolock_dual_lock_waits = count
          @job.enqueue(wait: delay)
          log(:info, "waited #{lock.wait_timeout} s for its duplicate to finish; enqueued again to run in " \
                     "#{delay.round(2)} s (dual_lock key #{key.inspect}, #{count} so far)")
          Ferrolock.instrument(:rescheduled, primitive: :dual_lock, key: key, reason: :wait_timeout,
                                             class: @job.class.name, job_id: @job.job_id, count: count, delay: delay)
        end

        # The backoff proc's answer, or Ferrolock::Backoff's when there is none or it answered no
        # usable delay.
        def delay_for(backoff, count, lock, error)
          Backoff.answered(count, backoff, ->(why) { log(:warn, "dual_lock #{why}") }) do
            backoff.call(lock, @job, error)
          end
        end

        def log(level, text)
          Ferrolock.logger.public_send(level, "ferrolock: #{@job.class.name} #{@job.job_id} #{text}")
        end
      end
    end
  end
end
