# frozen_string_literal: true

# What both uniqueness middlewares load.
require "ferrolock"
require_relative "../compat"
require_relative "../reschedule"
require_relative "settings"
require_relative "digest"
require_relative "lock"

module Ferrolock
  module Sidekiq
    module Unique
      # What the uniqueness client and server middlewares share: their one option.
      module Middleware
        OPTIONS = %i[client].freeze

        # client: a Ferrolock::Client (default Ferrolock.client).
        def initialize(options = {})
          Compat.check!
          Validate.options!(options, OPTIONS, self.class.name)
          @client = options[:client]
          Validate.client!(@client) unless nil.equal?(@client)
        end
      end
    end
  end
end
