# frozen_string_literal: true

require_relative "reschedule"
require_relative "compat"
require_relative "active_job_hooks"

# Fails at `chain.add` (which loads this file) on a Sidekiq version ferrolock does not support.
Ferrolock::Sidekiq::Compat.check!
Ferrolock::Sidekiq::ActiveJobHooks.install

module Ferrolock
  module Sidekiq
    # Sidekiq server middleware: a job whose limiter (ConcurrentLimiter or RateLimiter) raised
    # Ferrolock::OverLimit is pushed again for later (same jid, a counter in the payload) instead of
    # failing, and without counting a retry. The delay is never below the OverLimit's retry_after
    # (a rate limiter's next slot): the job does not come back before it could run. After
    # max_reschedules the OverLimit goes to Sidekiq's normal retry handling.
    #
    #   Sidekiq.configure_server do |config|
    #     config.server_middleware do |chain|
    #       chain.add Ferrolock::Sidekiq::LimiterMiddleware,
    #                 max_reschedules: 20,                         # the default
    #                 backoff: ->(limiter, job, ex) { 30 }         # seconds; default grows with jitter
    #     end
    #   end
    #
    # A job class may set its own cap: sidekiq_options ferrolock_max_reschedules: 5.
    class LimiterMiddleware
      COUNTER = "ferrolock_overlimit"
      JOB_OPTION = "ferrolock_max_reschedules"
      DEFAULT_MAX_RESCHEDULES = 20
      OPTIONS = %i[max_reschedules backoff].freeze

      attr_reader :max_reschedules, :backoff

      def initialize(options = {})
        Compat.check!
        Validate.options!(options, OPTIONS, self.class.name)
        @max_reschedules = self.class.max_reschedules!(:max_reschedules,
                                                       options.fetch(:max_reschedules, DEFAULT_MAX_RESCHEDULES))
        @backoff = Validate.callable!(:backoff, options[:backoff], "->(limiter, job, ex) { seconds }")
      end

      # (An ActiveJob job's OverLimit is handled inside ActiveJob's perform, so ActiveJob logs
      # neither an error nor "Performed" for a rescheduled run: see ActiveJobHooks.)
      def call(_worker, job, queue, &block)
        ActiveJobHooks.install
        handled = nil
        ActiveJobHooks.rescheduling(job, lambda { |error|
          handled = error
          reschedule_or_give_up(job, queue, error)
        }, &block)
      rescue Ferrolock::OverLimit => e
        raise if e.equal?(handled) || !reschedule_or_give_up(job, queue, e)
      end

      def self.max_reschedules!(arg, value)
        Validate.count!(arg, value, min: 0)
      end

      private

      # The delay the job was rescheduled with, or nil when it is out of reschedules.
      def reschedule_or_give_up(job, queue, error)
        count = job.fetch(COUNTER, 0).to_i
        exhausted?(job, count, queue, error) ? nil : reschedule(job, count + 1, queue, error)
      end

      def exhausted?(job, count, queue, error)
        cap = job.key?(JOB_OPTION) ? self.class.max_reschedules!(JOB_OPTION, job[JOB_OPTION]) : @max_reschedules
        return false if count < cap

        Ferrolock.log(:warn, "ferrolock: #{Sidekiq.job_label(job)} over limit " \
                             "#{limiter_name(error).inspect} after #{count} reschedules; Sidekiq's retry takes over")
        Ferrolock.instrument(:reschedules_exhausted, **payload(job, queue, error, count: count))
        true
      end

      def reschedule(job, count, queue, error)
        delay = delay_for(job, count, error)
        Reschedule.call(job, delay: delay, counter: COUNTER)
        cap = job.fetch(JOB_OPTION, @max_reschedules)
        Ferrolock.log(:info, "ferrolock: #{Sidekiq.job_label(job)} over limit #{limiter_name(error).inspect}; " \
                             "#{Reschedule.due(delay)} (#{count}/#{cap})")
        Ferrolock.instrument(:rescheduled, **payload(job, queue, error, count: count, delay: delay))
        delay
      end

      # The backoff proc's answer, or the default (see Reschedule.delay), but at least retry_after.
      def delay_for(job, count, error)
        delay = Reschedule.delay(count, @backoff, "limiter") { @backoff.call(error.limiter, job, error) }
        [delay, error.retry_after || 0].max
      end

      def payload(job, queue, error, **extra)
        { name: limiter_name(error), reason: :over_limit, class: Sidekiq.job_class_name(job), jid: job["jid"],
          queue: queue, **limiter_kind(error.limiter), **extra }
      end

      # primitive: (and for a RateLimiter kind:) of the limiter that refused.
      def limiter_kind(limiter)
        return { primitive: :rate_limiter, kind: limiter.kind } if limiter.is_a?(RateLimiter)

        { primitive: :concurrent_limiter }
      end

      def limiter_name(error)
        error.limiter&.name
      end
    end
  end
end
