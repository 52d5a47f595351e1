# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # Prepended to a job class by Concurrency: notes jobs read back from a queue (only those are
    # checked at perform), sends a blocked job's enqueue to ParkedAdapter, and writes the slots the
    # job holds into its payload (BeforePerform gives them back if it fails before it performs),
    # and which promotion it is (Promotion).
    module JobHooks
      def serialize
        holds = BeforePerform.holds(self)
        Promotion.carry(self, holds ? super.merge(BeforePerform::SlotHolds::HOLDS => holds) : super)
      end

      # A copy read back keeps its promotion, through a retry_on retry too: the copy that started
      # goes on (admit.lua runs it again).
      def deserialize(job_data)
        super
        @ferrolock_from_queue = true
        @ferrolock_promotion = Promotion.read(job_data)
      end

      def queue_adapter
        @ferrolock_parked ? ParkedAdapter : super
      end
    end
  end
end
