# frozen_string_literal: true

module Ferrolock
  # Sidekiq middlewares, loaded on first use (autoload), so `require "ferrolock"` makes them usable
  # without loading Sidekiq, whichever of the two an app requires first. Inside `module Ferrolock`,
  # Sidekiq's own constants must be written `::Sidekiq`: a bare `Sidekiq` means this module.
  module Sidekiq
    autoload :ActiveJobHooks, File.expand_path("sidekiq/active_job_hooks", __dir__)
    autoload :ActiveJobLogQuiet, File.expand_path("sidekiq/active_job_log_quiet", __dir__)
    autoload :Compat, File.expand_path("sidekiq/compat", __dir__)
    autoload :DualLock, File.expand_path("sidekiq/dual_lock", __dir__)
    autoload :FairTenantMiddleware, File.expand_path("sidekiq/fair_tenant_middleware", __dir__)
    autoload :LimiterMiddleware, File.expand_path("sidekiq/limiter_middleware", __dir__)
    autoload :Reschedule, File.expand_path("sidekiq/reschedule", __dir__)
    autoload :RunningJob, File.expand_path("sidekiq/running_job", __dir__)
    autoload :Unique, File.expand_path("sidekiq/unique", __dir__)

    # The names these constants had before each name gave its file (0.x): kept, warning once.
    RENAMED = {
      **%w[ClientMiddleware Digest Leases Lock Middleware OptionNames OnConflict Push Resumption Retry
           ServerMiddleware Settings Unsupported].to_h { |name| [:"Unique#{name}", "#{self.name}::Unique::#{name}"] },
      DualLockMiddleware: "Ferrolock::Sidekiq::DualLock::Middleware",
      DualLockSettings: "Ferrolock::Sidekiq::DualLock::Settings"
    }.freeze
    private_constant :RENAMED
    Deprecation.renamed_constants(self, RENAMED)

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
