# frozen_string_literal: true

require_relative "token"

module Ferrolock
  module Testing
    # Native::MessageLease's interface; place: the message's key in the store.
    class MessageLease < Token
      attr_reader :place
      attr_writer :lost

      def initialize(backend, place)
        super(backend)
        @place = place
      end

      def lost?
        @lost ? true : false
      end
    end
  end
end
