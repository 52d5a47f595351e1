# frozen_string_literal: true

require_relative "unique_lock"

module Ferrolock
  module Testing
    module Fake
      # Native::KeyLock in memory: UniqueLock's behaviour on a key taken as it is.
      class KeyLock < UniqueLock
        def initialize(store, client, key) # rubocop:disable Lint/MissingSuper -- its own place and key
          @store = store
          @place = Fake.place(client, :key, key)
          @key = key
        end
      end
    end
  end
end
