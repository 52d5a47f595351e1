# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # Prepended to a job class by Concurrency: notes jobs read back from a queue (only those are
    # checked at perform), and sends a blocked job's enqueue to ParkedAdapter.
    module JobHooks
      def deserialize(job_data)
        super
        @ferrolock_from_queue = true
      end

      def queue_adapter
        @ferrolock_parked ? ParkedAdapter : super
      end
    end
  end
end
