# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    # Makes two Sidekiq-middleware outcomes read in ActiveJob as what they are. Installed on
    # ActiveJob::Base (when it loads) by Unique::ClientMiddleware and LimiterMiddleware, as early as
    # possible, so an app's own callbacks run inside these:
    #
    # - a duplicate that Unique::ClientMiddleware did not push is an aborted enqueue: `perform_later`
    #   returns false (ActiveJob 6.1 and 7.x alike), ActiveJob logs "Failed enqueuing …, a
    #   before_enqueue callback halted" instead of "Enqueued …", and later enqueue callbacks do
    #   not run;
    # - a Ferrolock::OverLimit out of an ActiveJob job's perform is handed to LimiterMiddleware
    #   (running this job) right there. A job it reschedules leaves perform by `throw`, not as an
    #   exception, and ActiveJob's log subscriber is told to keep quiet about that run: the one line
    #   about it is LimiterMiddleware's (both ids, the real delay), with no "Error performing" and
    #   its backtrace, and no "Performed" for a run that did not perform. One out of reschedules is
    #   raised as it came, an error for ActiveJob and Sidekiq's retry alike. An OverLimit the job
    #   class rescues itself (rescue_from, retry_on) is left to it.
    #
    # Each signal is thrown only while the matching catch is on this fiber's stack for this very job
    # (a thread/fiber-local names the job): nothing is thrown at code that does not expect it.
    module ActiveJobHooks
      SKIPPED = :ferrolock_unique_skipped
      RESCHEDULED = :ferrolock_rescheduled
      ENQUEUING = :ferrolock_active_job_enqueuing
      PERFORMING = :ferrolock_active_job_performing
      RESCHEDULED_JOB = :ferrolock_active_job_rescheduled

      module_function

      # Registers the callbacks for when ActiveJob::Base loads (at once if it has). A no-op until
      # ActiveSupport is loaded (there is no ActiveJob before it): ferrolock never loads it itself,
      # so the middlewares call this again as they run (Rails loads ActiveSupport before any
      # initializer, so there it takes effect when the middleware file loads).
      def install
        return if @installed
        return unless defined?(::ActiveSupport) && ::ActiveSupport.respond_to?(:on_load)

        @installed = true
        ::ActiveSupport.on_load(:active_job) do
          around_enqueue { |job, block| Ferrolock::Sidekiq::ActiveJobHooks.enqueue(job, &block) }
          around_perform { |job, block| Ferrolock::Sidekiq::ActiveJobHooks.perform(job, &block) }
          # (active_job/base requires it before this hook runs)
          ::ActiveJob::LogSubscriber.prepend(Ferrolock::Sidekiq::ActiveJobLogQuiet)
        end
      end

      # around_enqueue: an enqueue whose push the uniqueness middleware skipped ends as a halted one.
      def enqueue(job, &block)
        skipped = true
        catch(SKIPPED) do
          FiberLocal.with(ENQUEUING, job.job_id, &block)
          skipped = false
        end
        # What ActiveJob's instrumentation reads to log a halted enqueue. (Named :ferrolock_unique,
        # not :enqueue: 6.1 would otherwise warn that after_enqueue callbacks will stop running.)
        job.send(:halted_callback_hook, "ferrolock uniqueness", :ferrolock_unique) if skipped
      end

      # Unique::ClientMiddleware, after it did not push `payload`: ends the ActiveJob enqueue of this
      # job, if one waits for it on this fiber (else returns, and the push returns nil as usual).
      def skipped!(payload)
        job_id = active_job_id(payload)
        throw SKIPPED if job_id && Thread.current[ENQUEUING] == job_id
      end

      # around_perform: an OverLimit that LimiterMiddleware (running this job) reschedules is an
      # ActiveJob retry, and leaves by throw.
      def perform(job)
        yield
      rescue Ferrolock::OverLimit => e
        jid, reschedule = Thread.current[PERFORMING]
        # provider_job_id is nil when run inline (perform_now): no middleware runs it then.
        raise unless reschedule && job.provider_job_id == jid && !handled_by_job?(job, e)

        raise unless reschedule.call(e)

        Thread.current[RESCHEDULED_JOB] = job
        throw RESCHEDULED
      end

      # LimiterMiddleware: runs the job, and for an ActiveJob job has `reschedule` (OverLimit ->
      # its delay once rescheduled, or nil) called inside ActiveJob's perform, by #perform.
      def rescheduling(payload, reschedule, &block)
        return yield unless active_job_id(payload)

        FiberLocal.with(RESCHEDULED_JOB, nil) do
          catch(RESCHEDULED) do
            return FiberLocal.with(PERFORMING, [payload["jid"], reschedule].freeze, &block)
          end
        end
        nil
      end

      # Whether `job`'s perform, now ending, was rescheduled by #perform (read by ActiveJobLogQuiet
      # as ActiveJob's perform instrumentation finishes, while the throw unwinds through it).
      def rescheduled?(job)
        !job.nil? && Thread.current[RESCHEDULED_JOB].equal?(job)
      end

      # The ActiveJob job id of a Sidekiq payload wrapping an ActiveJob job, else nil.
      def active_job_id(payload)
        Hash === payload ? Job.from_sidekiq(payload).job_id : nil # rubocop:disable Style/CaseEquality
      end

      def handled_by_job?(job, error)
        job.respond_to?(:handler_for_rescue) && job.handler_for_rescue(error) ? true : false
      end
    end
  end
end
