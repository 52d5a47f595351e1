# frozen_string_literal: true

require_relative "../../dual_lock_settings"

module Ferrolock
  module Sidekiq
    module DualLock
      # A Sidekiq job class's `sidekiq_options dual_lock: …` (see Ferrolock::DualLockSettings).
      class Settings < Ferrolock::DualLockSettings
        # nil when the class did not opt in.
        def self.for(job_class)
          raw = raw_option(job_class)
          return nil if nil.equal?(raw) || false.equal?(raw)

          new(job_class, raw)
        end

        # The class's dual_lock option, from sidekiq_options (also on ActiveJob classes that include
        # Sidekiq::Worker::Options, as sidekiq/rails does).
        def self.raw_option(job_class)
          return nil unless Validate.responds_to?(job_class, :get_sidekiq_options)

          options = job_class.get_sidekiq_options
          options.fetch("dual_lock") { options[:dual_lock] }
        end

        private

        def option_label
          "sidekiq_options dual_lock"
        end
      end
    end
  end
end
