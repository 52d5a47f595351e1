# frozen_string_literal: true

require_relative "token"

module Ferrolock
  module Testing
    # Native::DualLockTicket's interface: :running, :waiting, :skipped or :left.
    class DualLockTicket < Token
      attr_accessor :stage

      def initialize(backend, stage)
        super(backend)
        @stage = stage
      end
    end
  end
end
