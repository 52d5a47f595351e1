# frozen_string_literal: true

require_relative "before_perform/slot_holds"

module Ferrolock
  module ActiveJob
    # A job that fails before it performs: its payload cannot be deserialized (a record deleted
    # while it waited: ActiveJob::DeserializationError), its class is missing in this worker
    # (NameError), or a callback raised or halted before a feature's perform callback began. Such a
    # job never reaches the callbacks that free what it took by its job_id at enqueue (a
    # limits_concurrency slot, a concurrency_rule place, a uniqueness lock), which would then stay
    # taken until its lease or TTL ran out; a promoted one would be promoted again, fail again, and
    # stall its key.
    #
    # One mechanism for every adapter and every feature: every worker runs a job through
    # ActiveJob::Base.execute(job_data) (Sidekiq's and Shoryuken's JobWrapper, :async, Solid Queue,
    # the test helpers). What a job holds travels in its serialized payload; each feature registers a
    # handler (BeforePerform.register) that reads it (`held(job_data)`, nil: nothing) and frees it
    # (`failed(job_data, held, error, why)`). `execute` is wrapped once, and when it ends (raising or
    # not) before a feature's perform callback began (BeforePerform.started(job, feature)), that
    # feature's handler frees what the job held. The error itself goes on to the adapter (its retry,
    # or its failed jobs), as without ferrolock.
    module BeforePerform
      CURRENT = :ferrolock_before_perform
      private_constant :CURRENT
      NOT_BEGUN = "its perform never began (a callback halted it, or rescue_from/discard_on handled an error " \
                  "raised before it)"
      private_constant :NOT_BEGUN

      # The job_id whose execute runs on this fiber, and the features whose perform callbacks began.
      Run = Struct.new(:job_id, :started)
      private_constant :Run

      # Wraps ActiveJob::Base.execute (prepended to its singleton class by BeforePerform.install).
      module Execute
        def execute(job_data)
          BeforePerform.around(job_data) { super }
        end
      end

      @handlers = { slots: SlotHolds }

      module_function

      # Once per process, when ActiveJob::Base exists (the features' includes call it).
      def install
        return if @installed
        return unless Object.const_defined?("ActiveJob::Base", false)

        @installed = true
        ::ActiveJob::Base.singleton_class.prepend(Execute)
      end

      # A feature's handler: `held(job_data)` and `failed(job_data, held, error, why)`.
      def register(feature, handler)
        @handlers = @handlers.merge(feature => handler).freeze
      end

      # The job took a slot in `key` (a Slots key) by its job_id: its payload carries it from now.
      def hold(job, key)
        holds = job.instance_variable_get(:@ferrolock_holds) || []
        job.instance_variable_set(:@ferrolock_holds, holds | [key])
      end

      # The Slots keys to serialize with the job (nil: none).
      def holds(job)
        holds = job.instance_variable_get(:@ferrolock_holds)
        holds unless holds.nil? || holds.empty?
      end

      # The Slots keys a payload carries (SlotHolds reads them).
      def keys_in(job_data)
        SlotHolds.held(job_data)
      end

      # Called as a feature's perform callback begins: from there its perform path keeps or frees
      # what the job holds.
      def started(job, feature = :slots)
        run = Thread.current[CURRENT]
        run.started << feature if run && run.job_id == job.job_id
      end

      def around(job_data)
        held = held_by(job_data)
        return yield if held.empty?

        run = Run.new(job_data["job_id"], [])
        outer = Thread.current[CURRENT]
        Thread.current[CURRENT] = run
        error = nil
        begin
          yield
        rescue Exception => e # rubocop:disable Lint/RescueException -- reported, then raised as it came
          error = e
          raise
        ensure
          Thread.current[CURRENT] = outer
          failed(job_data, held.except(*run.started), error)
        end
      end

      # { feature => what the payload says it holds } (ferrolock wrote them: anything else is ignored).
      def held_by(job_data)
        return {} unless job_data.is_a?(Hash) && job_data["job_id"].is_a?(String)

        @handlers.filter_map { |feature, handler| (held = handler.held(job_data)) && [feature, held] }.to_h
      end

      def failed(job_data, held, error)
        return if held.empty?

        why = error ? "#{error.class}: #{error.message}" : NOT_BEGUN
        held.each { |feature, what| @handlers.fetch(feature).failed(job_data, what, error, why) }
      end
    end
  end
end
