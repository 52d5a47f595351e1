# frozen_string_literal: true

require_relative "ferrolock/version"

# ferrolock's limits, events and errors, defined before any file that checks, sends or raises them.
module Ferrolock
  # Every event ferrolock instruments (the README's table); subscribe rejects other names, so a
  # typo fails at boot instead of never firing.
  EVENTS = %i[
    acquired lock_lost data_lost owner_gone release_failed skipped wait_timeout over_limit
    rescheduled reschedules_exhausted rerouted blocked promoted discarded released
    failed_before_perform limit_changed
    locked skipped_in_progress skipped_processed released_after_error redis_error
  ].freeze

  # The largest value of ANY seconds argument (TTLs, leases, waits, timeouts): 10 years. Far
  # beyond any real lease or wait, and far inside what Redis PX and Rust's Duration/Instant
  # arithmetic accept, so no value can overflow on the way.
  MAX_SECONDS = 315_360_000
  # The shortest TTL, lease or connect/read timeout: Redis counts expiries in milliseconds.
  # (Waits may be 0: one attempt.)
  MIN_TTL_SECONDS = 0.001
  # The longest name (lock name, DualLock key, namespace, queue, message id), in bytes.
  MAX_NAME_BYTES = 1024
  # The largest count (ConcurrentLimiter count, fair_tenant threshold, max_reschedules): exact
  # in Redis' Lua numbers (doubles) and in a 32-bit counter.
  MAX_COUNT = 1_000_000_000
  # Name prefixes of ferrolock's own key spaces. A DistMutex, DualLock or ConcurrentLimiter
  # named `unique:<Class>:<digest>` would share the key of a Sidekiq uniqueness lock (and
  # `…:run` its run-time lock), so an application's names may not start with them.
  RESERVED_PREFIXES = { "unique:" => "the Sidekiq uniqueness locks" }.freeze

  # Base class of every error ferrolock raises (bad arguments raise Ruby's
  # ArgumentError/TypeError instead).
  class Error < StandardError; end

  # Redis unreachable, refused the connection or did not answer in time.
  class ConnectionError < Error; end

  # min_replicas_acked: fewer replicas than asked acknowledged a grant in time (see WAIT); the
  # grant was given back. A ConnectionError, so middlewares treat it like Redis being down.
  class ReplicationError < ConnectionError; end

  # A wait passed its deadline.
  class TimeoutError < Error; end

  # A held lease was lost (expired or taken over by another owner).
  class LockLost < Error; end

  # A limiter (ConcurrentLimiter or RateLimiter) refused within its wait timeout. #limiter is the
  # limiter that refused, so a backoff ->(limiter, job, ex) can depend on it; #retry_after is the
  # seconds until a rate limiter's next slot opens (nil when unknown, as for a ConcurrentLimiter,
  # whose slots free when their holders finish).
  class OverLimit < Error
    attr_reader :limiter, :retry_after

    def initialize(message = nil, limiter: nil, retry_after: nil)
      super(message)
      @limiter = limiter
      @retry_after = retry_after
    end
  end

  # A job's uniqueness lock is held by a duplicate (Sidekiq `on_conflict: :raise`): names the digest
  # and the job class.
  class UniqueConflict < Error
    attr_reader :digest, :job_class

    def initialize(message = nil, digest: nil, job_class: nil)
      super(message)
      @digest = digest
      @job_class = job_class
    end
  end
end

require_relative "ferrolock/configuration"
require_relative "ferrolock/events"
require_relative "ferrolock/notifications"

require_relative "ferrolock/native_library"
require_relative "ferrolock/client"
require_relative "ferrolock/backend"
require_relative "ferrolock/validate"
require_relative "ferrolock/deprecation"
require_relative "ferrolock/internal_name"
require_relative "ferrolock/foreign_error"
require_relative "ferrolock/recently_made"
require_relative "ferrolock/clock"
require_relative "ferrolock/interrupts"
require_relative "ferrolock/cohort"
require_relative "ferrolock/release_failure"
require_relative "ferrolock/wait_timeout"
require_relative "ferrolock/fiber_local"
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
  # The Sidekiq Web tab (`require "ferrolock/web"`, or its first use: either loads Sidekiq Web and registers it).
  autoload :Web, File.join(__dir__, "ferrolock", "web")
end

# History counts events from here on when configured on (c.history = true, or FERROLOCK_HISTORY=1).
Ferrolock::History.apply(Ferrolock::Configuration.default_history)

# Rails integration, only under Rails (requiring ferrolock never loads Rails).
require_relative "ferrolock/railtie" if defined?(Rails::Railtie)
# The maxmemory-policy warning at a Sidekiq or Shoryuken server's startup.
Ferrolock::EvictionCheck.hook_servers
