# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # ActiveJob.perform_all_later (7.1+) runs no enqueue callbacks, so without this its jobs would
    # pass limits_concurrency and concurrency_rule's enqueue rules unchecked until they perform.
    # Wrapped, each job of a class with either is admitted as perform_later admits it, before the
    # one bulk enqueue of the rest:
    # - a job holding its slot (and places) goes to its adapter with the others;
    # - a blocked job is parked in Redis: it goes to ParkedAdapter (stored, so it counts as enqueued);
    # - a refused job (on_conflict: :discard, max_blocked with :discard, enqueue_limit, total_limit,
    #   enqueue_throttle) is left out: `successfully_enqueued?` false, its `enqueue_error` a
    #   Refused saying why (TooManyBlocked for max_blocked's :raise), and the enqueue_all event
    #   does not count it.
    # A job its adapter reports not enqueued (an enqueue_error) gives its slot and places back at
    # once, as perform_later's does; jobs of other classes pass unchanged.
    module EnqueueAll
      # Why perform_all_later left a job out (its `enqueue_error`; not raised).
      class Refused < Ferrolock::Error; end

      # Prepended to ActiveJob's singleton class.
      module PerformAllLater
        def perform_all_later(*jobs)
          EnqueueAll.around(jobs.flatten) { |admitted| super(admitted) }
        end
      end

      BULK = :@ferrolock_bulk
      private_constant :BULK

      module_function

      # Once per process, on ActiveJob 7.1+ (Concurrency.included calls it).
      def install
        return if @installed
        return unless ::ActiveJob.respond_to?(:perform_all_later)

        @installed = true
        ::ActiveJob.singleton_class.prepend(PerformAllLater)
      end

      # True while the bulk enqueue admits this job: its adapter's answer comes later (see settle).
      def deferred?(job)
        job.instance_variable_get(BULK) ? true : false
      end

      def around(jobs)
        outcomes = admit_all(jobs)
        held = outcomes.fetch(:held, [])
        result = parking(outcomes.fetch(:parked, [])) { yield jobs - outcomes.fetch(:refused, []) }
        settle(held.select(&:enqueue_error))
        result
      rescue Exception # rubocop:disable Lint/RescueException -- given back, then raised as it came
        settle(held.reject(&:successfully_enqueued?)) if held
        raise
      end

      # {outcome => jobs}; when Redis fails midway, the jobs admitted so far give back what they took.
      def admit_all(jobs)
        outcomes = Hash.new { |hash, outcome| hash[outcome] = [] }
        jobs.each { |job| outcomes[checked?(job) ? admit(job) : :pass] << job }
        outcomes
      rescue Exception # rubocop:disable Lint/RescueException -- given back, then raised as it came
        settle(outcomes.values_at(:held, :parked).flatten)
        raise
      end

      # Parked jobs go to ParkedAdapter (ActiveJob groups jobs by their queue_adapter).
      def parking(parked)
        parked.each { |job| job.instance_variable_set(:@ferrolock_parked, true) }
        yield
      ensure
        parked.each { |job| job.instance_variable_set(:@ferrolock_parked, false) }
      end

      def checked?(job)
        klass = job.class
        !Backend.pass_through? && klass.respond_to?(:ferrolock_concurrency) &&
          (klass.ferrolock_concurrency || !klass.ferrolock_concurrency_rules.empty?)
      end

      # :held, :parked or :refused, through the callbacks perform_later runs (rules, then
      # limits_concurrency). max_blocked's :raise refuses the job here (its enqueue_error), rather
      # than fail the whole batch.
      def admit(job)
        outcome = :refused
        job.instance_variable_set(BULK, true)
        inner = lambda do
          outcome = job.instance_variable_get(:@ferrolock_parked) ? :parked : :held
          true
        end
        ConcurrencyRules.around_enqueue(job, -> { Concurrency.around_enqueue(job, inner) })
        refused(job) if outcome == :refused
        outcome
      rescue Concurrency::TooManyBlocked => e
        refused(job, e)
      ensure
        job.instance_variable_set(BULK, false)
      end

      def refused(job, error = nil)
        job.successfully_enqueued = false
        job.enqueue_error = error || Refused.new("#{job.class.name} #{job.job_id} was not enqueued: ferrolock " \
                                                 "refused it (the :discarded event and log line say why)")
        :refused
      end

      # Admitted jobs that the adapter did not enqueue (an enqueue_error, or the bulk enqueue raised)
      # give back what they took.
      def settle(failed)
        return if failed.empty?

        slots = Slots.for(Ferrolock.client)
        failed.each do |job|
          (BeforePerform.holds(job) || []).each { |key| slots.give_back(key, job.job_id) }
        end
      rescue Ferrolock::Error => e
        Ferrolock.log(:warn, "ferrolock: perform_all_later: could not give back the slots of jobs not enqueued " \
                             "(#{e.class}: #{e.message}); they free when their lease runs out")
      end
    end
  end
end
