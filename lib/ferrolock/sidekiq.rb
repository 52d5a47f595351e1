# frozen_string_literal: true

module Ferrolock
  # Sidekiq middlewares, loaded on first use (autoload), so `require "ferrolock"` makes them usable
  # without loading Sidekiq, whichever of the two an app requires first. Inside `module Ferrolock`,
  # Sidekiq's own constants must be written `::Sidekiq`: a bare `Sidekiq` means this module.
  module Sidekiq
    autoload :ActiveJobHooks, File.expand_path("sidekiq/active_job_hooks", __dir__)
    autoload :ActiveJobLogQuiet, File.expand_path("sidekiq/active_job_log_quiet", __dir__)
    autoload :Compat, File.expand_path("sidekiq/compat", __dir__)
    autoload :DualLockMiddleware, File.expand_path("sidekiq/dual_lock_middleware", __dir__)
    autoload :DualLockSettings, File.expand_path("sidekiq/dual_lock_settings", __dir__)
    autoload :LimiterMiddleware, File.expand_path("sidekiq/limiter_middleware", __dir__)
    autoload :Reschedule, File.expand_path("sidekiq/reschedule", __dir__)
    autoload :RunningJob, File.expand_path("sidekiq/running_job", __dir__)
    autoload :UniqueClientMiddleware, File.expand_path("sidekiq/unique/client_middleware", __dir__)
    autoload :UniqueDigest, File.expand_path("sidekiq/unique/digest", __dir__)
    autoload :UniqueLeases, File.expand_path("sidekiq/unique/leases", __dir__)
    autoload :UniqueLock, File.expand_path("sidekiq/unique/lock", __dir__)
    autoload :UniqueMiddleware, File.expand_path("sidekiq/unique/middleware", __dir__)
    autoload :UniqueOptionNames, File.expand_path("sidekiq/unique/option_names", __dir__)
    autoload :UniqueOnConflict, File.expand_path("sidekiq/unique/on_conflict", __dir__)
    autoload :UniquePush, File.expand_path("sidekiq/unique/push", __dir__)
    autoload :UniqueResumption, File.expand_path("sidekiq/unique/resumption", __dir__)
    autoload :UniqueRetry, File.expand_path("sidekiq/unique/retry", __dir__)
    autoload :UniqueServerMiddleware, File.expand_path("sidekiq/unique/server_middleware", __dir__)
    autoload :UniqueSettings, File.expand_path("sidekiq/unique/settings", __dir__)
    autoload :UniqueUnsupported, File.expand_path("sidekiq/unique/unsupported", __dir__)

    # The job's class name for events and log lines (Ferrolock::Job#class_name: the wrapped class
    # for ActiveJob jobs).
    def self.job_class_name(job)
      Job.from_sidekiq(job).class_name
    end

    # The job in log lines (Ferrolock::Job#label).
    def self.job_label(job, class_name = nil)
      model = Job.from_sidekiq(job)
      class_name ? model.label(class_name) : model.label
    end
  end
end
