# frozen_string_literal: true

require_relative "token"

module Ferrolock
  module Testing
    # Native::LimiterSlot's interface.
    class LimiterSlot < Token
      def token
        id
      end
    end
  end
end
