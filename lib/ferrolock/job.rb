# frozen_string_literal: true

module Ferrolock
  # Which job this really is, whatever carries it: a Sidekiq payload, an ActiveJob instance or an SQS
  # message body. An ActiveJob job sent through Sidekiq or Shoryuken travels inside the adapter's
  # wrapper; every middleware, hook and digest asks this model for the job behind it, so all of them
  # read the wrapper by the same rules:
  #
  # - job_class: the Class when it is loaded here, else its name as a String (never a NameError: a
  #   process that does not load the class can still lock, log and digest the job);
  # - arguments: Sidekiq's "args"; for a wrapped ActiveJob job ActiveJob's serialized "arguments";
  #   for an ActiveJob instance its arguments;
  # - job_id: ActiveJob's job id (nil for a plain Sidekiq/Shoryuken job), jid: Sidekiq's jid.
  class Job
    # How ActiveJob's Sidekiq job class name ends, by version: Rails' adapter (and Sidekiq 7.3's alias
    # of it) "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"; Sidekiq 8's own wrapper.
    SIDEKIQ_WRAPPER_SUFFIXES = %w[::SidekiqAdapter::JobWrapper ::ActiveJob::Wrapper].freeze
    # How Shoryuken names its ActiveJob wrapper worker: 6.x, then 7.x.
    SQS_WRAPPERS = %w[ActiveJob::QueueAdapters::ShoryukenAdapter::JobWrapper Shoryuken::ActiveJob::JobWrapper].freeze

    attr_reader :class_name, :arguments, :job_id, :jid, :queue

    class << self
      # A Sidekiq job payload. job_class: the class (or name) Sidekiq runs it as, when the caller
      # knows it (the client middleware's argument, the server's worker class); else payload["class"].
      # Garbage from a direct caller fails with a TypeError naming the part. (Types are tested with
      # `case`: a BasicObject has no is_a?.)
      def from_sidekiq(payload, job_class = nil)
        case payload
        when Hash then nil
        else raise TypeError, "job must be a Hash (a Sidekiq job payload), got #{Validate.show(payload)}"
        end
        return sidekiq_plain(payload, nil.equal?(job_class) ? payload["class"] : job_class) unless
          sidekiq_wrapper?(payload["class"]) && !nil.equal?(payload["wrapped"])

        data = Array(payload["args"]).first
        data = {} unless Hash === data # rubocop:disable Style/CaseEquality
        new(payload["wrapped"], data.fetch("arguments", []), active_job: true, job_id: data["job_id"],
                                                             jid: payload["jid"], queue: payload["queue"])
      end

      # An ActiveJob::Base instance.
      def from_active_job(job)
        new(job.class, job.arguments, active_job: true, job_id: job.job_id, jid: job.provider_job_id,
                                      queue: job.queue_name)
      end

      # A Shoryuken worker and its message body (parsed as JSON by Shoryuken when the worker asks).
      # Under Shoryuken's ActiveJob wrapper the body is the serialized job: its "job_class" names it.
      def from_sqs(worker, body)
        worker_class = worker.class
        return new(worker_class, body, active_job: false) unless SQS_WRAPPERS.include?(worker_class.name) &&
                                                                 Hash === body # rubocop:disable Style/CaseEquality

        new(present(body["job_class"]) || worker_class, body["arguments"], active_job: true,
                                                                           job_id: present(body["job_id"]),
                                                                           queue: body["queue_name"])
      end

      # Whether a Sidekiq job class name is ActiveJob's wrapper. (A name in an ASCII-incompatible
      # encoding, e.g. UTF-16, is no wrapper: end_with? would raise.)
      def sidekiq_wrapper?(class_name)
        case class_name
        when String then class_name.encoding.ascii_compatible? && class_name.end_with?(*SIDEKIQ_WRAPPER_SUFFIXES)
        when Module, Symbol then class_name.to_s.end_with?(*SIDEKIQ_WRAPPER_SUFFIXES)
        else false
        end
      end

      # The Class of this name when loaded here, else the name (a String); a TypeError for what
      # names no class.
      def constant(name)
        case name
        when Module then name
        when String, Symbol then loaded(name.to_s)
        else raise TypeError, "job class must be a Class, String or Symbol, got #{Validate.show(name)}"
        end
      end

      private

      def sidekiq_plain(payload, job_class)
        new(job_class, payload["args"], active_job: false, jid: payload["jid"], queue: payload["queue"])
      end

      def present(value)
        String === value && !value.empty? ? value : nil # rubocop:disable Style/CaseEquality
      end

      def loaded(name)
        Object.const_get(name)
      # Not loaded here: known by its name only. (EncodingError, ArgumentError: a name const_get cannot
      # read, e.g. not UTF-8; the features' settings check names.)
      rescue NameError, EncodingError, ArgumentError
        name
      end
    end

    def initialize(job_class, arguments, active_job:, job_id: nil, jid: nil, queue: nil) # rubocop:disable Metrics/ParameterLists
      @raw_class = job_class
      @class_name = case job_class
                    when Module then job_class.name.to_s
                    when String, Symbol then job_class.to_s
                    else Validate.show(job_class) # (job_class raises a TypeError for it)
                    end
      @arguments = arguments
      @active_job = active_job
      @job_id = job_id
      @jid = jid
      @queue = queue
    end

    # The Class when loaded here, else its name (see Job.constant), resolved on first use.
    def job_class
      @job_class ||= Job.constant(@raw_class)
    end

    def active_job?
      @active_job
    end

    # The job in log lines: "Class jid", or for an ActiveJob job "Class jid=… job_id=…" (ActiveJob's
    # own log lines give its job id, Sidekiq's the jid).
    def label(name = class_name)
      job_id ? "#{name} jid=#{jid} job_id=#{job_id}" : "#{name} #{jid}"
    end
  end
end
