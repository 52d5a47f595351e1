# frozen_string_literal: true

require_relative "token"

module Ferrolock
  module Testing
    # Native::JobSlot's interface: a performing job's slot on a limits_concurrency key. Its fence
    # goes once it is released or kept, as the native slot's does.
    class JobSlot < Token
      attr_reader :key, :job_id

      def initialize(backend, key, job_id, fence)
        super(backend)
        @key = key
        @job_id = job_id
        @fence = fence
        @done = false
      end

      def fence
        @done ? nil : @fence
      end

      # True when the slot went while held (Testing.reset!): nothing renews it any more.
      def lost?
        !@done && backend.lost?(self)
      end

      # Marks it released or kept; false when it was already (a slot is given back once).
      def finish!
        return false if @done

        @done = true
      end
    end
  end
end
