# frozen_string_literal: true

require "digest/sha2" # now: Digest::SHA256 loaded on first use can raise in one of two threads racing to it

module Ferrolock
  module Shoryuken
    # An ActiveJob job that enqueues itself again to go on later: a Rails 8.1 continuation interrupted at
    # a checkpoint (Shoryuken's adapter answers stopping? while the process shuts down), ActiveJob's
    # retry_on, an explicit retry_job. That send is a new SQS message carrying the same job_id, made on
    # the thread that runs the job. Under an idempotency key (the job_id, say), it would meet the key
    # its own run is about to mark processed, and be deleted as a duplicate. It is the same job going
    # on, as on Sidekiq (Ferrolock::Sidekiq::Unique::Resumption), so its message is tagged with the
    # message it resumes (ATTRIBUTE) and locked on the key AND that message: once, however often SQS
    # delivers it, while a second send of the job by its producer (untagged) is still a duplicate.
    module Resumption
      # The message attribute naming the SQS message id of the run that enqueued this one.
      ATTRIBUTE = "ferrolock_resumes"
      # [job_id, message_id] of the ActiveJob job this thread runs under the Lock.
      RUNNING = :ferrolock_shoryuken_running
      # What may go into a lock id as it is; anything else goes in as its SHA-256.
      PLAIN = /\A[A-Za-z0-9_.-]{1,128}\z/
      INSTALL_LOCK = Mutex.new
      private_constant :RUNNING, :PLAIN, :INSTALL_LOCK

      @installed = false

      module_function

      # Runs the block with `job_id` (from message `message_id`) as the job this thread runs.
      def running(job_id, message_id, &block)
        FiberLocal.with(RUNNING, [job_id, message_id], &block)
      end

      # ActiveJob's before_enqueue: when `job` is the job this thread runs, enqueuing itself again, its
      # message carries ATTRIBUTE (Shoryuken's adapter sends sqs_send_message_parameters' attributes).
      def tag(job)
        job_id, message_id = Thread.current[RUNNING]
        return unless job_id && job.job_id == job_id && job.respond_to?(:sqs_send_message_parameters)

        params = job.sqs_send_message_parameters
        return unless params.is_a?(Hash)

        params[:message_attributes] = (params[:message_attributes] || {})
                                      .merge(ATTRIBUTE => { data_type: "String", string_value: message_id })
      end

      # Registers the callback for when ActiveJob::Base loads (at once if it has). The Lock calls it as it
      # runs an ActiveJob message, which is before that job can enqueue itself; ferrolock never loads
      # ActiveJob itself.
      def install
        return if @installed
        return unless defined?(::ActiveSupport) && ::ActiveSupport.respond_to?(:on_load)

        INSTALL_LOCK.synchronize do
          return if @installed

          @installed = true
        end
        ::ActiveSupport.on_load(:active_job) do
          before_enqueue { |job| Ferrolock::Shoryuken::Resumption.tag(job) }
        end
      end

      # The message id that sqs_msg resumes (its ATTRIBUTE), or nil.
      def resumed(sqs_msg)
        value = IdempotencyKey.attribute(sqs_msg, ATTRIBUTE)
        value.is_a?(String) && !value.empty? ? value : nil
      end

      # The lock id of a resumption of `resumed` under key id `key_id`: "resumes:<message id>:<key id>",
      # apart from every key id ("key:…") and message id.
      def lock_id(resumed, key_id)
        plain = resumed.valid_encoding? && resumed.match?(PLAIN)
        "resumes:#{plain ? resumed : "sha256-#{Digest::SHA256.hexdigest(resumed.b)}"}:#{key_id}"
      end
    end
  end
end
