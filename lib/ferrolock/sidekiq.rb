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

    # The job's class name for events and log lines: the wrapped class for ActiveJob jobs (whose
    # Sidekiq class is always ActiveJob's JobWrapper).
    def self.job_class_name(job)
      (job["wrapped"] || job["class"]).to_s
    end

    # The job in log lines: "Class jid", or for an ActiveJob job "Class jid=… job_id=…" (ActiveJob's
    # own log lines give its job id, Sidekiq's the jid).
    def self.job_label(job, class_name = job_class_name(job))
      job_id = ActiveJobHooks.active_job_id(job)
      job_id ? "#{class_name} jid=#{job["jid"]} job_id=#{job_id}" : "#{class_name} #{job["jid"]}"
    end
  end
end
