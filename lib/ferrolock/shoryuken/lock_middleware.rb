# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # Shoryuken server middleware: one execution per message on SQS standard queues, which may
    # deliver a message more than once. Insert it before AutoDelete:
    #
    #   chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::LockMiddleware
    #   chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::LockMiddleware,
    #                       enabled: true
    #
    # Opt-in per worker (`shoryuken_options ferrolock_lock: true`, or a Hash of options), per chain
    # (`enabled: true`) or for every worker (Ferrolock::Shoryuken.configure { |c| c.enabled = true }).
    # - first delivery: runs the job under an in-progress lease (renewed while it runs);
    # - the job succeeds: the message is "processed" for processed_ttl;
    # - the job raises: the lease is dropped and the error re-raised (SQS redelivers it);
    # - a copy of a processed message: not run, and deleted so it stops coming back;
    # - a copy of a message in progress: not run, left alone (if the run fails, it is the retry);
    # - its queue's lock paused by an operator (QueuePause): not run, back on the queue after paused_delay.
    class LockMiddleware
      # Shoryuken's chain keeps `chain.add LockMiddleware, lease: 120` as a positional Hash and calls
      # Lock.new(hash) for every message; plain keywords work too.
      def initialize(options = nil, **keywords)
        # `case`, not options.is_a?: a BasicObject has no is_a? (Validate's rule).
        case options
        when nil, Hash then nil
        else raise TypeError, "#{self.class} options must be a Hash, got #{Validate.show(options)}"
        end

        @options = Options.validate((options || {}).merge(keywords), self.class.name)
      end

      def call(worker, queue, sqs_msg, body = nil, &block)
        return yield if Backend.pass_through? # Ferrolock::Testing.disable!

        settings = Shoryuken.settings_for(@options, worker_option(worker))
        return yield unless settings.enabled?
        return pass_batch(worker, &block) if sqs_msg.is_a?(Array)

        Placement.check!(worker)

        job = Ferrolock::Job.from_sqs(worker, body)
        payload = event_payload(queue, sqs_msg, job.class_name)
        IdempotencyKey.add_to(payload, settings.idempotency_key, sqs_msg, body)
        job_id = job.job_id
        return process(settings, worker, sqs_msg, payload, &block) unless job_id

        # An ActiveJob job: it may enqueue itself again to go on (Resumption).
        resumes = Resumption.resumed(sqs_msg)
        payload[:resumes] = resumes if resumes && payload[:idempotency_key]
        Resumption.install
        Resumption.running(job_id, payload[:message_id]) { process(settings, worker, sqs_msg, payload, &block) }
      end

      private

      def event_payload(queue, sqs_msg, class_name)
        { primitive: :shoryuken_lock, queue: queue, message_id: message_id!(sqs_msg),
          job_class: class_name, worker: class_name } # worker: deprecated
      end

      def process(settings, worker, sqs_msg, payload, &block)
        lock = settings.message_lock
        return if QueuePause.held?(lock.client, sqs_msg, payload, settings.paused_delay)

        # The lease is recorded the moment it is granted; whatever lands after that (Thread#kill,
        # Thread#raise) before the job settled it gives the message back in the ensure below.
        held = { lease: nil, settled: false, since: nil }
        begin
          case begin_message(lock, settings, payload, held)
          when :redis_unavailable then yield
          when :processed then skip_processed(sqs_msg, payload)
          when :in_progress then skip_in_progress(payload)
          else run_locked(lock, held, payload, worker, &block)
          end
        ensure
          settle_after_error(lock, held, payload, nil) if held[:lease] && !held[:settled]
        end
      end

      def worker_option(worker)
        klass = worker.class
        return nil unless klass.respond_to?(:get_shoryuken_options)

        options = klass.get_shoryuken_options || {}
        options.fetch("ferrolock_lock") { options[:ferrolock_lock] }
      end

      # "<worker> message <id>", for log lines.
      def about(payload) = "#{payload[:job_class]} message #{payload[:message_id]}"

      def pass_batch(worker)
        if Shoryuken.first_batch_warning?(worker.class)
          Ferrolock.log(:warn, "ferrolock: #{worker.class} is a batch worker; Ferrolock::Shoryuken::LockMiddleware " \
                               "does not deduplicate batches and lets them through")
        end
        yield
      end

      def message_id!(sqs_msg)
        unless sqs_msg.respond_to?(:message_id)
          raise ArgumentError, "Ferrolock::Shoryuken::LockMiddleware: sqs_msg must respond to message_id, " \
                               "got #{sqs_msg.class}"
        end

        id = sqs_msg.message_id
        return id if id.is_a?(String) && !id.empty?

        raise ArgumentError, "Ferrolock::Shoryuken::LockMiddleware: sqs_msg.message_id must be a non-empty String, " \
                             "got #{id.inspect}"
      end

      # A lease, :processed, :in_progress, or :redis_unavailable when Redis failed and the
      # policy is to run anyway.
      def begin_message(lock, settings, payload, held)
        lock.begin_message(payload[:queue], IdempotencyKey.lock_id_of(payload)) { |lease| HoldTime.start(held, lease) }
      rescue Ferrolock::Error => e
        describe = "#{about(payload)} on #{payload[:queue]}: #{e.class}: #{e.message}"
        Ferrolock.instrument(:redis_error, payload.merge(error: e.class.name, policy: settings.on_redis_error))
        if settings.on_redis_error == :run
          Ferrolock.log(:warn, "ferrolock: Redis unavailable, running #{describe} without deduplication")
          return :redis_unavailable
        end
        Ferrolock.log(:warn, "ferrolock: Redis unavailable, #{describe}; left on the queue for redelivery")
        raise
      end

      def skip_processed(sqs_msg, payload)
        Ferrolock.instrument(:skipped_processed, payload)
        unless sqs_msg.respond_to?(:delete)
          Ferrolock.log(:warn, "ferrolock: duplicate of processed #{about(payload)} " \
                               "cannot be deleted (#{sqs_msg.class} has no #delete); it will come back")
          return nil
        end
        # Acknowledge the copy: nothing else will (AutoDelete runs only after a yield). A failed
        # delete is raised, not swallowed (a rescue here would also swallow Thread#raise and
        # Timeout): Shoryuken logs it, and the copy comes back and is deleted then.
        sqs_msg.delete
        nil
      end

      def skip_in_progress(payload)
        Ferrolock.instrument(:skipped_in_progress, payload)
        nil
      end

      # Marks the message processed after success, or gives it back when the job raised; either
      # way with asynchronous exceptions deferred, so none lands between the outcome and its record.
      # "The job" is the worker's perform when it can be watched (PerformWatch), whatever the
      # middlewares inside the Lock then did with it; else what the rest of the chain did.
      def run_locked(lock, held, payload, worker, &block)
        Ferrolock.instrument(:locked, payload)
        watch = PerformWatch.attach(worker)
        result = run_watched(lock, held, payload, watch, &block)
        return give_back_swallowed(lock, held, payload, result) if watch&.raised?

        Interrupts.release do
          held[:settled] = true
          finish(lock, held, payload)
        end
        result
      rescue Exception => e # rubocop:disable Lint/RescueException -- any failure means the job did not complete
        settle_after_error(lock, held, payload, e)
        raise
      ensure
        PerformWatch.detach(worker) if watch
      end

      # yield; when a middleware inside the Lock raised after the worker's perform returned (AutoDelete's
      # SQS delete failing), the job is marked processed before the error goes on: its copies are then
      # deleted, not run again (a charge made twice).
      def run_watched(lock, held, payload, watch)
        yield
      rescue Exception => e # rubocop:disable Lint/RescueException -- re-raised
        raise unless watch&.returned?

        Interrupts.release do
          held[:settled] = true
          finish(lock, held, payload)
        end
        Ferrolock.log(:warn, "ferrolock: #{about(payload)} succeeded, then the middleware chain after it raised " \
                             "#{e.class}: #{e.message}; marked processed, so its copies are deleted, not run again")
        raise
      end

      # The worker raised but a middleware inside the Lock swallowed it (ExponentialBackoffRetry
      # placed after the Lock): the job did not complete, so its retry must run.
      def give_back_swallowed(lock, held, payload, result)
        Ferrolock.log(:warn, "ferrolock: #{about(payload)}: its worker raised and a middleware inside the Lock " \
                             "swallowed the error; the message is given back for its retry")
        settle_after_error(lock, held, payload, nil)
        result
      end

      # Thread#kill runs ensure blocks but no rescue: `call`'s ensure gives the message back then.
      def settle_after_error(lock, held, payload, error)
        Interrupts.release do
          next if held[:settled]

          held[:settled] = true
          release_after_error(lock, held, payload, error)
        end
      end

      # The job succeeded: :released (with :held) once marked. A failure to mark it is logged, not
      # raised: raising would leave the message on the queue and run it again once the lease expires.
      def finish(lock, held, payload)
        outcome = lock.finish(held[:lease])
        return HoldTime.instrument(:released, held, payload) if outcome == :marked

        Ferrolock.instrument(:lock_lost, payload.merge(outcome: outcome))
        Ferrolock.log(:warn, "ferrolock: the in-progress lease of #{about(payload)} expired while " \
                             "its job ran (#{outcome}): a copy may have run too")
      rescue Ferrolock::Error => e
        # Marked in the background once Redis answers; meanwhile the unrenewed lease keeps copies out.
        ReleaseFailure.report(e, what: "marking #{about(payload)} processed", finished: true, **payload)
      end

      def release_after_error(lock, held, payload, error)
        lock.abort_message(held[:lease])
        HoldTime.instrument(:released_after_error, held, payload, error: error&.class&.name)
      rescue Ferrolock::Error => e
        ReleaseFailure.report(e, what: "giving back #{about(payload)}", finished: false, **payload)
      end
    end
  end
end
