# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # Prepended to a job class by Concurrency: notes jobs read back from a queue (only those are
    # checked at perform), sends a blocked job's enqueue to ParkedAdapter, and writes the slots the
    # job holds into its payload (BeforePerform gives them back if it fails before it performs).
    module JobHooks
      def serialize
        holds = BeforePerform.holds(self)
        holds ? super.merge(BeforePerform::SlotHolds::HOLDS => holds) : super
      end

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
