# frozen_string_literal: true

module Ferrolock
  # Rails integration, loaded by lib/ferrolock.rb only when Rails::Railtie is defined:
  # - Ferrolock.logger defaults to Rails.logger (an app's own c.logger, set before or in an
  #   initializer, wins);
  # - configuration goes in config/initializers/ferrolock.rb (Ferrolock.configure);
  # - in a Sidekiq server, the boot checks (DualLock::Middleware.validate!, FairTenant.verify!,
  #   Unique::ServerMiddleware.validate!) run
  #   on Sidekiq's :startup event, after the app (eager-)loaded its job classes. Turn them off with
  #   `c.boot_checks = false`;
  # - limits_concurrency's timer starts when a Sidekiq, Shoryuken or Solid Queue worker starts.
  class Railtie < ::Rails::Railtie
    # After Rails.logger exists, before config/initializers: an initializer's c.logger overrides this.
    initializer "ferrolock.logger", after: :initialize_logger, before: :load_config_initializers do
      Ferrolock::Railtie.default_logger(::Rails.logger)
    end

    # The maxmemory-policy warning when the app boots, not at its first lock (in the background:
    # a boot never waits on Redis for it).
    config.after_initialize { Ferrolock::EvictionCheck.at_boot(wait: 0) }

    # limits_concurrency and dual_lock on every ActiveJob class, whatever the adapter.
    initializer "ferrolock.active_job_concurrency" do
      ::ActiveSupport.on_load(:active_job) { include Ferrolock::ActiveJob::Concurrency }
      ::ActiveSupport.on_load(:active_job) { include Ferrolock::ActiveJob::DualLock }
    end

    # Registered at boot, fired by Sidekiq once the app is loaded; a no-op outside a Sidekiq server.
    initializer "ferrolock.sidekiq_boot_checks", after: :load_config_initializers do
      next unless defined?(::Sidekiq) && ::Sidekiq.respond_to?(:configure_server)

      ::Sidekiq.configure_server do |sidekiq|
        sidekiq.on(:startup) { Ferrolock::Railtie.boot_checks(sidekiq) }
      end
    end

    # limits_concurrency's timer runs in every job server from its boot (see ExpiryTimer.start).
    initializer "ferrolock.concurrency_timer", after: :load_config_initializers do
      Ferrolock::Railtie.start_timer_in_job_servers
    end

    class << self
      # Registers ExpiryTimer.start with each job server's start hook: Sidekiq's and Shoryuken's
      # :startup (run only in their server processes) and Solid Queue's worker start.
      def start_timer_in_job_servers
        start = ->(*) { Ferrolock::ActiveJob::ExpiryTimer.start if defined?(::ActiveJob::Base) }
        ::Sidekiq.configure_server { |c| c.on(:startup, &start) } if server_hooks?(:Sidekiq)
        ::Shoryuken.configure_server { |c| c.on(:startup, &start) } if server_hooks?(:Shoryuken)
        ::SolidQueue.on_worker_start(&start) if defined?(::SolidQueue) && ::SolidQueue.respond_to?(:on_worker_start)
      end

      # Whether a loaded Sidekiq or Shoryuken takes server hooks.
      def server_hooks?(name)
        Object.const_defined?(name) && Object.const_get(name).respond_to?(:configure_server)
      end

      # Sets the logger unless the app already chose one (the reader's lazy default does not count).
      def default_logger(logger)
        return if logger.nil? || Ferrolock.config.logger_set?

        Ferrolock.config.logger = logger
      end

      # Runs each check whose middleware is in Sidekiq's chains (an app using neither gets no
      # "found no class" warning). A bad DualLock option or FairTenant rule raises, so Sidekiq stops
      # at boot; both checks run first, so one boot reports every bad class. A queue this process
      # does not fetch is logged as an ERROR by verify! (another process may fetch it).
      def boot_checks(sidekiq)
        return unless Ferrolock.config.boot_checks

        errors = []
        dual_lock = run_check(sidekiq.server_middleware, Ferrolock::Sidekiq::DualLock::Middleware, "dual_lock",
                              "DualLock::Middleware.validate!", errors) do |classes|
          Ferrolock::Sidekiq::DualLock::Middleware.validate!(*classes)
        end
        fair_tenant = run_check(sidekiq.client_middleware, Ferrolock::Sidekiq::FairTenantMiddleware,
                                "fair_tenant_queues", "FairTenant.verify!", errors) do |classes|
          Ferrolock::FairTenant.verify!(classes)
        end
        unique = run_check(sidekiq.server_middleware, Ferrolock::Sidekiq::Unique::ServerMiddleware, "lock",
                           "Unique::ServerMiddleware.validate!", errors) do |classes|
          Ferrolock::Sidekiq::Unique::ServerMiddleware.validate!(*classes)
        end
        raise_all!(errors)
        Ferrolock.log(:info, "ferrolock: boot checks ran (DualLock: #{dual_lock}; FairTenant: #{fair_tenant}; " \
                             "Unique: #{unique}; Lua scripts: #{scripting_check}; " \
                             "turn off with c.boot_checks = false)")
      end

      private

      # A server that will not run scripts stops Sidekiq here, named, rather than at the first lock.
      # Redis down is left to Sidekiq (which needs it too) and to each call's ConnectionError.
      def scripting_check
        Ferrolock.client.check_scripting!
        "ok"
      rescue Ferrolock::ConnectionError => e
        "not checked (#{e.message})"
      end

      # What was checked, for the log line: "2 job classes", or "middleware not added". A check's
      # ArgumentError / TypeError is collected in `errors`.
      def run_check(chain, middleware, option, check, errors)
        return "middleware not added" unless chain.exists?(middleware)

        classes = JobClasses.found(option, check)
        begin
          yield classes unless classes.empty?
        rescue ArgumentError, TypeError => e
          errors << e
        end
        "#{classes.size} job class#{"es" unless classes.size == 1}"
      end

      # One failed check raises its own error; both raise one ArgumentError holding the two.
      def raise_all!(errors)
        return if errors.empty?
        raise errors.first if errors.size == 1

        raise ArgumentError, "ferrolock boot checks failed (c.boot_checks = false turns them off):\n" \
                             "#{errors.map { |e| "#{e.class}: #{e.message}".gsub(/^/, "  ") }.join("\n")}"
      end
    end
  end
end
