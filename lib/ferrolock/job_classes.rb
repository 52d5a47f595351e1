# frozen_string_literal: true

module Ferrolock
  # The loaded Sidekiq job classes declaring a sidekiq_options key, for boot-time checks
  # (FairTenant.verify!, DualLockMiddleware.validate!). Eager-load the app first.
  module JobClasses
    # Classes reachable by their name only: a class replaced by code reloading, or anonymous,
    # is never pushed by name.
    def self.with_option(option)
      ObjectSpace.each_object(Class).select do |klass|
        klass.respond_to?(:get_sidekiq_options) && klass.get_sidekiq_options[option] &&
          klass.name && Object.const_get(klass.name).equal?(klass)
      rescue StandardError
        false
      end
    end
  end
end
