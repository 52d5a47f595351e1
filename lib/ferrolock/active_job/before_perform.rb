# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # A job that fails before it performs: its payload cannot be deserialized (a record deleted
    # while it waited: ActiveJob::DeserializationError), its class is missing in this worker
    # (NameError), or a callback raised or halted before ferrolock's perform callback began. Such
    # a job never reaches the callbacks that give its slots back, so each slot it took by its
    # job_id (a limits_concurrency slot, a concurrency_rule place) would stay taken until its lease
    # ran out, and a promoted one would be promoted again then, fail again, and stall its key.
    #
    # One mechanism for every adapter: every worker runs a job through ActiveJob::Base.execute(job_data)
    # (Sidekiq's and Shoryuken's JobWrapper, :async, Solid Queue, the test helpers). The keys a job
    # holds a slot in travel in its serialized payload (HOLDS); `execute` is wrapped, and when it ends
    # (raising or not) before the job's perform callbacks began (BeforePerform.started), those slots
    # are given back at once, a parked payload is dropped with them (nothing is promoted twice), the
    # next blocked job is promoted, and :failed_before_perform says which job and why. The error
    # itself goes on to the adapter (its retry, or its failed jobs), as without ferrolock.
    #
    # Features that take something by job_id at enqueue record it with BeforePerform.hold(job, key)
    # and mark the start of their perform path with BeforePerform.started(job).
    module BeforePerform
      # The payload field: the Slots keys this job took a slot in before it ran.
      HOLDS = "ferrolock_holds"
      CURRENT = :ferrolock_before_perform
      private_constant :CURRENT
      NOT_BEGUN = "its perform never began (a callback halted it, or rescue_from/discard_on handled an error " \
                  "raised before it)"
      private_constant :NOT_BEGUN

      # The job_id whose execute runs on this fiber, and whether its perform callbacks began.
      Run = Struct.new(:job_id, :started)
      private_constant :Run

      # Wraps ActiveJob::Base.execute (prepended to its singleton class by BeforePerform.install).
      module Execute
        def execute(job_data)
          BeforePerform.around(job_data) { super }
        end
      end

      module_function

      # Once per process, when ActiveJob::Base exists (Concurrency.included calls it).
      def install
        return if @installed
        return unless defined?(::ActiveJob::Base)

        @installed = true
        ::ActiveJob::Base.singleton_class.prepend(Execute)
      end

      # The job took a slot in `key` (a Slots key) by its job_id: its payload carries it from now.
      def hold(job, key)
        holds = job.instance_variable_get(:@ferrolock_holds) || []
        job.instance_variable_set(:@ferrolock_holds, holds | [key])
      end

      # The keys to serialize with the job (nil: none).
      def holds(job)
        holds = job.instance_variable_get(:@ferrolock_holds)
        holds unless holds.nil? || holds.empty?
      end

      # Called as ferrolock's perform callback begins: from there the perform path keeps or gives
      # back the job's slots.
      def started(job)
        run = Thread.current[CURRENT]
        run.started = true if run && run.job_id == job.job_id
      end

      def around(job_data)
        keys = keys_in(job_data)
        return yield unless keys

        run = Run.new(job_data["job_id"], false)
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
          failed(job_data, keys, error) unless run.started
        end
      end

      # The keys of a payload that carries some (ferrolock wrote them: anything else is ignored).
      def keys_in(job_data)
        return nil unless job_data.is_a?(Hash) && job_data["job_id"].is_a?(String)

        keys = job_data[HOLDS]
        keys.is_a?(Array) && !keys.empty? && keys.all?(String) ? keys : nil
      end

      def failed(job_data, keys, error)
        job = [job_data["job_class"].to_s, job_data["job_id"]]
        why = error ? "#{error.class}: #{error.message}" : NOT_BEGUN
        slots = Slots.for(Ferrolock.client)
        keys.each { |key| give_back(slots, key, job, why, error) }
      end

      # job: [class name, job_id]
      def give_back(slots, key, job, why, error)
        job_class, job_id = job
        held = slots.give_back(key, job_id) == true
        what = held ? "its slot on #{key} is given back" : "it held no live slot on #{key} any more"
        Ferrolock.logger.warn("ferrolock: #{job_class} #{job_id} failed before it performed (#{why}); #{what}, and " \
                              "a payload of it parked there is dropped: it is not promoted again")
        Ferrolock.instrument(:failed_before_perform, primitive: primitive(key), name: key, job_class: job_class,
                                                     job_id: job_id, held: held, error: error&.class&.name,
                                                     reason: why)
      rescue Ferrolock::Error => e
        Ferrolock.logger.warn("ferrolock: #{job_class} #{job_id} failed before it performed (#{why}); its slot on " \
                              "#{key} could not be given back (#{e.class}: #{e.message}): it frees when its lease " \
                              "runs out")
      end

      # concurrency_rule's places are named "rule:<stage>:<key>" (ConcurrencyRule#name).
      def primitive(key)
        key.start_with?("rule:") ? :concurrency_rule : :limits_concurrency
      end
    end
  end
end
