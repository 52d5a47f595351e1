# frozen_string_literal: true

require "securerandom"

module Ferrolock
  module Testing
    # What a fake or disabled acquisition hands out (a hold, slot, ticket or lease): it remembers
    # the backend that made it, so its release reaches that backend after the mode changed.
    class Token
      attr_reader :backend, :id

      def initialize(backend)
        @backend = backend
        @id = SecureRandom.uuid
      end
    end
  end
end
