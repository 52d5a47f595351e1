# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # The callbacks of concurrency_rule (installed with Concurrency).
    module ConcurrencyRules
      # Class-level API (extended with Concurrency's).
      module ClassMethods
        # A GoodJob-style rule (ConcurrencyRule: perform_limit:, perform_throttle:, enqueue_throttle:,
        # enqueue_limit:, total_limit:, duration:); each call adds one. Bad options raise ArgumentError
        # naming the option.
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
        AbortedEnqueue.reset(job)
        rules = job.class.ferrolock_concurrency_rules
        # A job enqueued again after it ran (a rule's reschedule, a retry, a resumption), or a blocked
        # job limits_concurrency promotes (its enqueue passed the rules when it was parked), is already
        # in flight: an enqueue rule never drops it.
        return block.call if rules.empty? || skip?(job) || in_flight?(job)

        rules.each_with_index do |rule, index|
          reason, why = rule.enqueue(job)
          next unless reason

          rules.first(index).each { |admitted| admitted.not_enqueued(job) }
          return refuse(job, reason, why)
        end
        enqueue(job, rules, block)
      end

      def in_flight?(job)
        job.executions.to_i.positive? || job.instance_variable_get(:@ferrolock_promoted)
      end

      # The adapter's enqueue; a job it did not enqueue (it raised, or ActiveJob 7.1+ recorded an
      # EnqueueError) gives its places back at once.
      def enqueue(job, rules, block)
        enqueued = false
        result = block.call
        enqueued = AbortedEnqueue.enqueued?(job)
        result
      ensure
        rules.each { |rule| rule.not_enqueued(job) } unless enqueued
      end

      # An aborted enqueue, as GoodJob's (perform_later false); the log line says which option and key.
      def refuse(job, reason, why)
        Ferrolock.log(:info, "ferrolock: #{job.class.name} #{job.job_id}: discarded: #{why}")
        Ferrolock.instrument(:discarded, primitive: :concurrency_rule, name: job.class.name, job_class: job.class.name,
                                         job_id: job.job_id, at: :enqueue, reason: reason)
        AbortedEnqueue.mark(job)
      end

      def around_perform(job, block)
        rules = job.class.ferrolock_concurrency_rules
        return block.call if rules.empty? || skip?(job) || !job.instance_variable_get(:@ferrolock_from_queue)

        outcome = chain(job, rules, 0, block)
        return outcome unless outcome.is_a?(ConcurrencyRule::Over)

        # ActiveJob's own "Retrying" line says when it runs again. Not a continuation: a
        # limits_concurrency slot it holds is given back, not kept for the retry (see Concurrency).
        job.instance_variable_set(:@ferrolock_rule_refused, true)
        begin
          job.retry_job(wait: outcome.delay, error: outcome.error)
        ensure
          job.instance_variable_set(:@ferrolock_rule_refused, false)
        end
        nil
      end

      def chain(job, rules, index, block)
        if index == rules.size
          rules.each { |rule| rule.started(job) }
          return block.call
        end

        rules[index].perform(job) { chain(job, rules, index + 1, block) }
      end

      def skip?(_job)
        Backend.pass_through?
      end
    end
  end
end
