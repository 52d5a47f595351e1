# frozen_string_literal: true

module Ferrolock
  # Warns once per client when Redis may evict ferrolock's keys, the way Sidekiq warns at boot.
  # Every ferrolock key has a TTL, so the volatile-* policies pick exactly ferrolock's keys and
  # the allkeys-* ones may pick them too: an evicted lock is a lock silently released. Anything
  # but noeviction is warned about.
  #
  # The check is one CONFIG GET in a background thread, started when the process boots (the
  # Railtie, Sidekiq's and Shoryuken's :startup: EvictionCheck.at_boot) or else by the client's
  # first use: the hot path pays one instance-variable test, and nothing here ever raises. A server that
  # refuses CONFIG (ACL, managed Redis) is logged at debug level only; when Redis is down the
  # check is retried on a use at least RETRY_AFTER seconds later.
  class EvictionCheck
    RETRY_AFTER = 30.0
    # How long a server's startup waits for the check (Redis slow or down: it goes on without).
    BOOT_WAIT = 2.0

    class << self
      # Checks Ferrolock.client's policy now, once per client, waiting at most `wait` seconds for
      # the answer (0: not at all). Not under Ferrolock::Testing's fake or disabled modes.
      def at_boot(wait: BOOT_WAIT)
        return nil if Ferrolock.const_defined?(:Testing, false) && !Ferrolock::Testing.real?

        check = Ferrolock.client.eviction_check
        check.start
        check.join(wait) if wait.positive?
        nil
      rescue StandardError => e # a boot never fails over a warning
        Ferrolock.log(:warn, "ferrolock: could not check Redis' maxmemory-policy at boot: #{e.class}: #{e.message}")
        nil
      end

      # Runs at_boot on Sidekiq's and Shoryuken's :startup. Their servers are loaded before the app
      # (their CLI requires them first), so this runs when ferrolock is required; a second
      # registration (the Railtie's) costs nothing, since the check runs once per client.
      def hook_servers
        if defined?(::Sidekiq) && ::Sidekiq.respond_to?(:configure_server)
          ::Sidekiq.configure_server { |config| config.on(:startup) { at_boot } }
        end
        return unless defined?(::Shoryuken) && ::Shoryuken.respond_to?(:configure_server)

        ::Shoryuken.configure_server { |config| config.on(:startup) { at_boot } }
      end
    end

    def initialize(native, url)
      @native = native
      @url = url
      @done = false
      @next_try = nil
      @thread = nil
      @lock = ::Mutex.new
    end

    # Called on every use of the client.
    def start
      return if @done || (@next_try && Ferrolock.monotonic < @next_try)

      @lock.synchronize do
        return if @done || @thread&.alive?

        @next_try = Ferrolock.monotonic + RETRY_AFTER
        @thread = Thread.new { check }
      end
    end

    # Waits for a running check (for specs); true when the policy was learned or refused.
    def join(timeout = nil)
      @thread&.join(timeout)
      @done
    end

    private

    def check
      Thread.current.name = "ferrolock-eviction-check"
      Thread.current.report_on_exception = false
      policy = @native.maxmemory_policy
      @done = true
      warn_about(policy) if policy && policy != "noeviction"
    rescue ConnectionError, TimeoutError => e
      debug("ferrolock: could not read Redis' maxmemory-policy (#{e.class}: #{e.message}); will retry")
    rescue StandardError => e # (this file runs on the check's own thread: nothing foreign lands here)
      @done = true # refused (ACL, managed Redis): asking again would not help
      debug("ferrolock: Redis refused CONFIG GET maxmemory-policy (#{e.class}: #{e.message})")
    end

    def warn_about(policy)
      Ferrolock.log(:warn, "ferrolock: Redis at #{@url} has maxmemory-policy #{policy}: when memory runs out " \
                           "it may evict ferrolock's keys (every one has a TTL, so volatile-* policies pick exactly " \
                           "them), which silently releases held locks and slots. Set maxmemory-policy noeviction " \
                           "(logged once per client).")
    rescue StandardError
      nil
    end

    def debug(message)
      logger = Ferrolock.logger
      logger.debug(message) if logger.respond_to?(:debug)
    rescue StandardError
      nil
    end
  end
end
