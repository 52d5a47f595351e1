# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    # What the uniqueness client and server middlewares share: their one option.
    module UniqueMiddleware
      OPTIONS = %i[client].freeze

      # client: a Ferrolock::Client (default Ferrolock.client).
      def initialize(options = {})
        Compat.check!
        unknown = options.keys - OPTIONS
        raise ArgumentError, "unknown option#{"s" if unknown.size > 1}: #{unknown.join(", ")}" unless unknown.empty?

        @client = options[:client]
        Validate.client!(@client) unless @client.nil?
      end
    end
  end
end
