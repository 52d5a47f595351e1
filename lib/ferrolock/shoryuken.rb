# frozen_string_literal: true

require_relative "../ferrolock" unless defined?(Ferrolock::Native::MessageLock)
require_relative "shoryuken/options"
require_relative "shoryuken/configuration"
require_relative "shoryuken/message_lock"
require_relative "shoryuken/settings"
require_relative "shoryuken/perform_watch"
require_relative "shoryuken/placement"
require_relative "shoryuken/idempotency_key"
require_relative "shoryuken/resumption"
require_relative "shoryuken/hold_time"
require_relative "shoryuken/queue_pause"
require_relative "shoryuken/lock_middleware"

module Ferrolock
  # Shoryuken integration. Never requires the shoryuken gem: the middleware works with any
  # chain that calls `call(worker, queue, sqs_msg, body) { ... }`.
  #
  #   Shoryuken.configure_server do |config|
  #     config.server_middleware do |chain|
  #       chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::LockMiddleware
  #     end
  #   end
  #
  #   class ChargeCard
  #     include Shoryuken::Worker
  #     shoryuken_options queue: "payments", auto_delete: true, ferrolock_lock: true
  #   end
  module Shoryuken
    STATE_LOCK = Mutex.new
    private_constant :STATE_LOCK
    # Settings per (chain options, worker option); bounded, since both come from code.
    MAX_CACHED_SETTINGS = 1000
    private_constant :MAX_CACHED_SETTINGS

    # Shoryuken::Lock: the deprecated name of Ferrolock::Shoryuken::LockMiddleware.
    Deprecation.renamed_constants(self, Lock: "Ferrolock::Shoryuken::LockMiddleware")

    @defaults = Options::DEFAULTS
    @settings = {}
    @warned_batch = {}

    class << self
      # Process-wide defaults, e.g. in an initializer:
      #   Ferrolock::Shoryuken.configure { |c| c.enabled = true; c.lease = 120 }
      def configure
        config = Configuration.new(defaults)
        yield config
        STATE_LOCK.synchronize do
          @defaults = config.to_h.freeze
          @settings = {}
        end
        config
      end

      def defaults
        STATE_LOCK.synchronize { @defaults }
      end

      # Back to the built-in defaults (tests use it).
      def reset!
        STATE_LOCK.synchronize do
          @defaults = Options::DEFAULTS
          @settings = {}
          @warned_batch = {}
        end
      end

      # The Settings for chain options (already validated) and a worker's ferrolock_lock value.
      def settings_for(chain_options, worker_value)
        key = [chain_options, worker_value]
        STATE_LOCK.synchronize do
          @settings[key] ||= begin
            @settings.clear if @settings.size >= MAX_CACHED_SETTINGS
            Settings.new(@defaults.merge(chain_options).merge(Options.from_worker(worker_value)))
          end
        end
      end

      # True the first time it is asked about a worker class (one warning per class).
      def first_batch_warning?(worker_class)
        STATE_LOCK.synchronize { @warned_batch[worker_class] ? false : (@warned_batch[worker_class] = true) }
      end
    end
  end
end
