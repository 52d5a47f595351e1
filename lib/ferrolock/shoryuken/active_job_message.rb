# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # A message that Shoryuken's ActiveJob adapter sent: its worker is the adapter's JobWrapper, its
    # body (parsed as JSON by Shoryuken) the serialized job.
    module ActiveJobMessage
      # How Shoryuken names the wrapper: 6.x, then 7.x.
      WRAPPERS = %w[ActiveJob::QueueAdapters::ShoryukenAdapter::JobWrapper Shoryuken::ActiveJob::JobWrapper].freeze

      module_function

      # The worker's class name; under ActiveJob, the job's class (the body's "job_class"), as the
      # Sidekiq middlewares do.
      def job_class(worker, body)
        name = worker.class.name
        field(name, body, "job_class") || name
      end

      # The ActiveJob job_id of a wrapper's message, else nil.
      def job_id(worker, body)
        field(worker.class.name, body, "job_id")
      end

      def field(worker_name, body, name)
        return nil unless WRAPPERS.include?(worker_name) && body.is_a?(Hash)

        value = body[name]
        value.is_a?(String) && !value.empty? ? value : nil
      end
    end
  end
end
