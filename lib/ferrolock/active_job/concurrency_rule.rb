# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # One GoodJob-style rule (`concurrency_rule`), built on ferrolock's limiter and rate limiter; a job
    # class may have several, checked in the order they were declared:
    #
    #   concurrency_rule key: ->(account) { account }, perform_limit: 2
    #   concurrency_rule key: "partner-api", perform_throttle: [10, :minute], enqueue_throttle: [1000, :hour]
    #
    # - perform_limit: at most n of the key perform at once (a ConcurrentLimiter slot held while it performs);
    # - perform_throttle: [count, period]: at most count performs start in any period (a sliding-window RateLimiter);
    # - enqueue_throttle: [count, period]: at most count enqueues per period; past it perform_later returns false.
    # A job over a perform rule is not run now: ActiveJob's retry_job enqueues it again after a delay (the
    # throttle's retry_after, or 1, 2, 4 ... s up to 5 min for a limit), which ActiveJob's own "Retrying"
    # log line shows. (GoodJob's total_limit is limits_concurrency's `to:` with on_conflict: :discard.)
    class ConcurrencyRule
      # A perform a rule refused: run again after `delay` seconds; `error` is the limiter's OverLimit.
      Over = Struct.new(:delay, :error)

      # The longest delay before a job over a perform_limit runs again.
      MAX_DELAY = 300
      # How long a crashed process's perform_limit slot stays taken (renewed while the job performs).
      LEASE = 30

      attr_reader :perform_limit, :perform_throttle, :enqueue_throttle

      def initialize(key:, label: nil, perform_limit: nil, perform_throttle: nil, enqueue_throttle: nil)
        # The key, as limits_concurrency's: "<label (default: the class name)>/<key>".
        @keying = ConcurrencyPolicy.new(key: key, group: label)
        if perform_limit
          @perform_limit = option(:perform_limit) do
            Validate.positive_integer!(:perform_limit, perform_limit)
          end
        end
        @perform_throttle = throttle!(:perform_throttle, perform_throttle)
        @enqueue_throttle = throttle!(:enqueue_throttle, enqueue_throttle)
        return if @perform_limit || @perform_throttle || @enqueue_throttle

        raise ArgumentError, "concurrency_rule: give perform_limit:, perform_throttle: or enqueue_throttle:"
      end

      # False when an enqueue_throttle refuses this enqueue now.
      def enqueue?(job)
        return true unless @enqueue_throttle

        limiter = throttle(@enqueue_throttle, "enqueue", job)
        limiter.within_limit { true }
      rescue OverLimit => e
        raise unless e.limiter.equal?(limiter)

        false
      end

      # Runs the block within this rule; an OverLimit of the rule's own (never one of the block's) comes
      # back as an Over.
      def perform(job, &block)
        if @perform_throttle
          limiter = throttle(@perform_throttle, "perform", job)
          over = own_over_limit(limiter) { limiter.within_limit { nil } }
          return over if over
        end
        return yield unless @perform_limit

        slots = ConcurrentLimiter.new(name(job, "running"), @perform_limit, wait_timeout: 0, lease: LEASE)
        within(slots, job, &block)
      end

      private

      def within(slots, job)
        result = nil
        over = own_over_limit(slots, delay: backoff(job)) { slots.within_limit { result = yield } }
        over || result
      end

      # An Over when `limiter` refused (its own OverLimit), else nil after the block.
      def own_over_limit(limiter, delay: nil)
        yield
        nil
      rescue OverLimit => e
        raise unless e.limiter.equal?(limiter)

        Over.new(delay || e.retry_after || 1.0, e)
      end

      # 1, 2, 4 ... s by the job's executions, up to MAX_DELAY.
      def backoff(job)
        [2**[job.executions.to_i - 1, 0].max, MAX_DELAY].min.to_f
      end

      def throttle(rule, stage, job)
        count, period = rule
        RateLimiter.window(name(job, stage), count, period, wait_timeout: 0, sliding: true)
      end

      def name(job, stage)
        "rule:#{stage}:#{@keying.key_for(job)}"
      end

      def throttle!(name, value)
        return nil if value.nil?

        count, period, *rest = value.is_a?(Array) ? value : [nil]
        unless rest.empty? && !count.nil? && !period.nil?
          raise ArgumentError, "concurrency_rule #{name}: must be [count, period], got #{Validate.show(value)}"
        end

        option(name) { [Validate.positive_integer!(:count, count), RateLimiter.interval!(period)] }
      end

      def option(name)
        yield
      rescue TypeError, ArgumentError => e
        raise ArgumentError, "concurrency_rule #{name}: #{e.message}"
      end
    end

    # The callbacks of concurrency_rule (installed with Concurrency).
    module ConcurrencyRules
      # Class-level API (extended with Concurrency's).
      module ClassMethods
        # A GoodJob-style rule (ConcurrencyRule: perform_limit:, perform_throttle:, enqueue_throttle:);
        # each call adds one. Bad options raise ArgumentError naming the option.
        def concurrency_rule(**options)
          (@ferrolock_concurrency_rules ||= []) << ConcurrencyRule.new(**options)
        end

        # The rules in force: the parent's, then the class's own.
        def ferrolock_concurrency_rules
          inherited = superclass.respond_to?(:ferrolock_concurrency_rules) ? superclass.ferrolock_concurrency_rules : []
          inherited + (@ferrolock_concurrency_rules || [])
        end
      end

      module_function

      def around_enqueue(job, block)
        rules = job.class.ferrolock_concurrency_rules
        # A job enqueued again after it ran (a rule's reschedule, a retry, a resumption) is already in
        # flight: an enqueue rule never drops it.
        return block.call if rules.empty? || skip?(job) || job.executions.to_i.positive?

        refused = rules.find { |rule| !rule.enqueue?(job) }
        return block.call unless refused

        Ferrolock.logger.info("ferrolock: #{job.class.name} #{job.job_id}: discarded by its enqueue_throttle")
        Ferrolock.instrument(:discarded, primitive: :concurrency_rule, name: job.class.name, job_class: job.class.name,
                                         job_id: job.job_id, at: :enqueue, reason: :enqueue_throttle)
        false
      end

      def around_perform(job, block)
        rules = job.class.ferrolock_concurrency_rules
        return block.call if rules.empty? || skip?(job) || !job.instance_variable_get(:@ferrolock_from_queue)

        outcome = chain(job, rules, 0, block)
        return outcome unless outcome.is_a?(ConcurrencyRule::Over)

        # ActiveJob's own "Retrying" line says when it runs again.
        job.retry_job(wait: outcome.delay, error: outcome.error)
        nil
      end

      def chain(job, rules, index, block)
        return block.call if index == rules.size

        rules[index].perform(job) { chain(job, rules, index + 1, block) }
      end

      def skip?(_job)
        Backend.pass_through? || (Backend.factory && !Ferrolock::Testing.real?)
      end
    end
  end
end
