# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    # DualLock for Sidekiq jobs (`sidekiq_options dual_lock: …`): DualLock::Middleware in the server
    # chain, DualLock::Settings reading a job class's options. Inside this module, ferrolock's own
    # primitive is written Ferrolock::DualLock.
    module DualLock
      autoload :Middleware, File.expand_path("dual_lock/middleware", __dir__)
      autoload :Settings, File.expand_path("dual_lock/settings", __dir__)
    end
  end
end
