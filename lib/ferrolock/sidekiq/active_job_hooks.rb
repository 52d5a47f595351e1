# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    # Makes two Sidekiq-middleware outcomes read in ActiveJob as what they are. Installed on
    # ActiveJob::Base (when it loads) by UniqueClientMiddleware and LimiterMiddleware, as early as
    # possible, so an app's own callbacks run inside these:
    #
    # - a duplicate that UniqueClientMiddleware did not push is an aborted enqueue: `perform_later`
    #   returns false (ActiveJob 6.1 and 7.x alike), ActiveJob logs "Failed enqueuing …, a
    #   before_enqueue callback halted" instead of "Enqueued …", and later enqueue callbacks do
    #   not run;
    # - a Ferrolock::OverLimit out of an ActiveJob job's perform that LimiterMiddleware will
    #   reschedule leaves perform by `throw`, not as an exception, so ActiveJob does not log an
    #   "Error performing" with a backtrace for a routine reschedule (it logs "Performed", and
    #   ferrolock its "rescheduled" line). An OverLimit the job class rescues itself (rescue_from,
    #   retry_on) is left to it.
    #
    # Each signal is thrown only while the matching catch is on this fiber's stack for this very job
    # (a thread/fiber-local names the job): nothing is thrown at code that does not expect it.
    module ActiveJobHooks
      SKIPPED = :ferrolock_unique_skipped
      OVER_LIMIT = :ferrolock_over_limit
      ENQUEUING = :ferrolock_active_job_enqueuing
      PERFORMING = :ferrolock_active_job_performing

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
        end
      end

      # around_enqueue: an enqueue whose push the uniqueness middleware skipped ends as a halted one.
      def enqueue(job, &block)
        skipped = true
        catch(SKIPPED) do
          within(ENQUEUING, job.job_id, &block)
          skipped = false
        end
        # What ActiveJob's instrumentation reads to log a halted enqueue. (Named :ferrolock_unique,
        # not :enqueue: 6.1 would otherwise warn that after_enqueue callbacks will stop running.)
        job.send(:halted_callback_hook, "ferrolock uniqueness", :ferrolock_unique) if skipped
      end

      # UniqueClientMiddleware, after it did not push `payload`: ends the ActiveJob enqueue of this
      # job, if one waits for it on this fiber (else returns, and the push returns nil as usual).
      def skipped!(payload)
        job_id = active_job_id(payload)
        throw SKIPPED if job_id && Thread.current[ENQUEUING] == job_id
      end

      # around_perform: an OverLimit that LimiterMiddleware (running this job) catches leaves by throw.
      def perform(job)
        yield
      rescue Ferrolock::OverLimit => e
        jid = job.provider_job_id # nil when run inline (perform_now): nothing catches then
        raise unless jid && Thread.current[PERFORMING] == jid && !handled_by_job?(job, e)

        throw OVER_LIMIT, e
      end

      # LimiterMiddleware: runs the job; an OverLimit thrown out of its ActiveJob perform is raised
      # here, outside ActiveJob.
      def over_limit_raised(payload, &block)
        return yield unless active_job_id(payload)

        error = catch(OVER_LIMIT) do
          return within(PERFORMING, payload["jid"], &block)
        end
        raise error
      end

      # The ActiveJob job id of a Sidekiq payload wrapping an ActiveJob job, else nil.
      def active_job_id(payload)
        return nil unless Hash === payload && payload["wrapped"] # rubocop:disable Style/CaseEquality

        data = Array(payload["args"]).first
        Hash === data ? data["job_id"] : nil # rubocop:disable Style/CaseEquality
      end

      def within(key, value)
        outer = Thread.current[key]
        Thread.current[key] = value
        yield
      ensure
        Thread.current[key] = outer
      end

      def handled_by_job?(job, error)
        job.respond_to?(:handler_for_rescue) && job.handler_for_rescue(error) ? true : false
      end
    end
  end
end
