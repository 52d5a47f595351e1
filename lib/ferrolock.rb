# frozen_string_literal: true

require_relative "ferrolock/version"
require_relative "ferrolock/errors"
require_relative "ferrolock/configuration"
require_relative "ferrolock/events"
require_relative "ferrolock/notifications"

require_relative "ferrolock/native_library"
require_relative "ferrolock/client"
require_relative "ferrolock/backend"
require_relative "ferrolock/validate"
require_relative "ferrolock/deprecation"
require_relative "ferrolock/reserved_names"
require_relative "ferrolock/foreign_error"
require_relative "ferrolock/recently_made"
require_relative "ferrolock/clock"
require_relative "ferrolock/interrupts"
require_relative "ferrolock/cohort"
require_relative "ferrolock/release_failure"
require_relative "ferrolock/caller_timeout"
require_relative "ferrolock/lock_lost_watcher"
require_relative "ferrolock/data_loss"
require_relative "ferrolock/job_classes"
require_relative "ferrolock/history"

# Redis coordination primitives for Ruby job systems, with a Rust core.
module Ferrolock
  # Primitives and integrations loaded when their file exists (each adds one entry). None of them
  # loads Sidekiq or Shoryuken: the Sidekiq middlewares are autoloaded (lib/ferrolock/sidekiq.rb).
  PRIMITIVES = %w[
    dist_mutex
    concurrent_limiter
    rate_limiter
    dual_lock
    fair_tenant
    shoryuken
    sidekiq
  ].freeze

  PRIMITIVES.each do |name|
    path = File.join(__dir__, "ferrolock", "#{name}.rb")
    require path if File.exist?(path)
  end

  # Which job a Sidekiq payload, an ActiveJob instance or an SQS body really is.
  autoload :Job, File.join(__dir__, "ferrolock", "job")
  # The one rule for "the same arguments" in lock keys.
  autoload :ArgumentDigest, File.join(__dir__, "ferrolock", "argument_digest")
  # The one backoff curve of jobs pushed back for later.
  autoload :Backoff, File.join(__dir__, "ferrolock", "backoff")
  # The one shape of option parsing: known keys, errors naming the owner and the option.
  autoload :OptionCheck, File.join(__dir__, "ferrolock", "option_check")
  # limits_concurrency for ActiveJob on any adapter (Ferrolock::ActiveJob::Concurrency).
  autoload :ActiveJob, File.join(__dir__, "ferrolock", "active_job")
  # The operators' read model and force release (Sidekiq Web tab, `ferrolock` command).
  autoload :Admin, File.join(__dir__, "ferrolock", "admin")
  # The Sidekiq Web tab's module (registered with Sidekiq Web by `require "ferrolock/web"`).
  autoload :Web, File.join(__dir__, "ferrolock", "web", "tab")
end

# History counts events from here on when configured on (c.history = true, or FERROLOCK_HISTORY=1).
Ferrolock::History.apply(Ferrolock::Configuration.default_history)

# Rails integration, only under Rails (requiring ferrolock never loads Rails).
require_relative "ferrolock/railtie" if defined?(Rails::Railtie)
# The maxmemory-policy warning at a Sidekiq or Shoryuken server's startup.
Ferrolock::EvictionCheck.hook_servers
