# frozen_string_literal: true

require_relative "token"

module Ferrolock
  module Testing
    # Native::MutexHold's interface. released_by_sleep: set once DistMutex#sleep released it (the
    # sleep takes the lock again). announced: its owner ended and its release was announced.
    class MutexHold < Token
      attr_reader :fencing_token
      attr_writer :released_by_sleep, :announced

      def initialize(backend, fencing_token)
        super(backend)
        @fencing_token = fencing_token
        @released_by_sleep = false
        @announced = false
      end

      def released_by_sleep?
        @released_by_sleep
      end

      def announced?
        @announced
      end
    end
  end
end
