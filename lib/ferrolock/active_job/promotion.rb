# frozen_string_literal: true

require "json"

module Ferrolock
  module ActiveJob
    # Enqueues blocked jobs that were just given a slot. Each keeps its payload in Redis until it
    # starts, so one whose enqueue fails here (the adapter raised, this process died) goes back
    # to the head of its line when its lease runs out: a promotion is never a lost job.
    module Promotion
      module_function

      # promoted: [[job_id, payload JSON], ...] from a Redis script.
      def enqueue(promoted)
        promoted.each do |job_id, payload|
          job = ::ActiveJob::Base.deserialize(JSON.parse(payload))
          # Due now: the slot is its own already (its concurrency check at enqueue is skipped).
          job.scheduled_at = nil
          job.instance_variable_set(:@ferrolock_promoted, true)
          job.enqueue
        rescue StandardError => e
          Ferrolock.logger.warn("ferrolock: limits_concurrency: could not enqueue promoted job #{job_id} " \
                                "(#{e.class}: #{e.message}); it is promoted again when its lease runs out")
        end
        nil
      end
    end
  end
end
