# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # The adapter a blocked job is "enqueued" to: it is parked in Redis already (its payload, in
    # its key's line), so nothing is pushed. Going through ActiveJob's enqueue to here rather than
    # halting it keeps perform_later's answer true to what happened: the job is stored and will
    # run (it returns the job, not false, and no "halted" line is logged).
    module ParkedAdapter
      module_function

      def enqueue(_job) = nil

      def enqueue_at(_job, _timestamp) = nil
    end
  end
end
