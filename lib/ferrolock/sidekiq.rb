# frozen_string_literal: true

module Ferrolock
  # Sidekiq middlewares, loaded on first use (autoload), so `require "ferrolock"` makes them usable
  # without loading Sidekiq, whichever of the two an app requires first. Inside `module Ferrolock`,
  # Sidekiq's own constants must be written `::Sidekiq`: a bare `Sidekiq` means this module.
  module Sidekiq
    autoload :Compat, File.expand_path("sidekiq/compat", __dir__)
    autoload :DualLockMiddleware, File.expand_path("sidekiq/dual_lock_middleware", __dir__)
    autoload :DualLockSettings, File.expand_path("sidekiq/dual_lock_settings", __dir__)
    autoload :LimiterMiddleware, File.expand_path("sidekiq/limiter_middleware", __dir__)
    autoload :Reschedule, File.expand_path("sidekiq/reschedule", __dir__)

    # The job's class name for events and log lines: the wrapped class for ActiveJob jobs (whose
    # Sidekiq class is always ActiveJob's JobWrapper).
    def self.job_class_name(job)
      (job["wrapped"] || job["class"]).to_s
    end
  end
end
