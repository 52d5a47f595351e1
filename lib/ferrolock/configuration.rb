# frozen_string_literal: true

require "logger"
require_relative "validate"
require_relative "deprecation"
require_relative "configuration/current"
require_relative "configuration/topology_settings"

# Global settings: Ferrolock.configure, Ferrolock.config and the default client.
module Ferrolock
  # Global settings, set once in an initializer with Ferrolock.configure.
  class Configuration
    DEFAULT_URL = "redis://127.0.0.1:6379/0"
    DEFAULT_NAMESPACE = "ferrolock"
    NAMESPACE_ENV = "FERROLOCK_NAMESPACE"
    # The Cluster and Sentinel settings' environment variables (TopologySettings', by their older name).
    TOPOLOGY_ENV = TopologySettings::ENV_VARIABLES
    # FairTenant's modes, by their older name (FairTenant::Config, included by fair_tenant.rb).
    def self.fair_tenant_mode!(arg, value) = FairTenant::Config.mode!(arg, value)
    Deprecation.renamed_constants(self, FAIR_TENANT_MODES: "Ferrolock::FairTenant::Config::MODES")
    DEFAULT_TIMEOUT = 1.0
    # The most seconds a thread polls for a reply before sleeping (see reply_spin=).
    DEFAULT_REPLY_SPIN = 0.0002
    MAX_REPLY_SPIN = 0.01

    attr_reader :redis_url, :namespace, :connect_timeout, :read_timeout, :reply_spin, :tls_ca_file, :history

    # Most replicas min_replicas_acked may ask for.
    MAX_REPLICAS_ACKED = 100

    def initialize
      @redis_url = self.class.default_redis_url
      @namespace = self.class.default_namespace
      @connect_timeout = DEFAULT_TIMEOUT
      @read_timeout = DEFAULT_TIMEOUT
      @reply_spin = env_reply_spin || DEFAULT_REPLY_SPIN
      @tls_ca_file = nil
      @logger = nil
      @boot_checks = true
      @min_replicas_acked = 0
      @history = self.class.default_history
    end

    # Per-minute counts of every event in Redis (Ferrolock::History); default: default_history.

    def history=(value)
      @history = Validate.boolean!(:history, value)
    end

    # The default min_replicas_acked of DistMutex, DualLock and ConcurrentLimiter (0: don't wait):
    # each grant must reach that many replicas (WAIT) before the caller enters, else it is given
    # back and Ferrolock::ReplicationError raised. Narrows, but does not close, the window in
    # which a failover loses a granted lock (README: Failover).
    attr_reader :min_replicas_acked

    def min_replicas_acked=(value)
      @min_replicas_acked = self.class.min_replicas_acked!(value)
    end

    def self.min_replicas_acked!(value)
      raise TypeError, "min_replicas_acked must be an Integer, got #{Validate.class_of(value)}" unless Integer === value # rubocop:disable Style/CaseEquality -- BasicObject-safe
      unless value.between?(0, MAX_REPLICAS_ACKED)
        raise ArgumentError, "min_replicas_acked must be between 0 and #{MAX_REPLICAS_ACKED}, got #{value}"
      end

      value
    end

    # Under Rails, whether the Railtie runs DualLock::Middleware.validate! and FairTenant.verify! at
    # Sidekiq server start (lib/ferrolock/railtie.rb). Default true.
    attr_reader :boot_checks

    def boot_checks=(value)
      @boot_checks = Validate.boolean!(:boot_checks, value)
    end

    # nil means the default: FERROLOCK_REDIS_URL, else REDIS_URL, else DEFAULT_URL (so
    # `c.redis_url = ENV["FERROLOCK_REDIS_URL"]` works in an app that only sets REDIS_URL).
    # :sidekiq means Sidekiq's own Redis (its configured URL and password).
    def redis_url=(value)
      @redis_url = nil.equal?(value) ? self.class.default_redis_url : self.class.redis_url!(value)
    end

    # A PEM bundle of CAs to trust for rediss:// (a private CA); nil: the system's roots.
    def tls_ca_file=(value)
      @tls_ca_file = Validate.path!(:tls_ca_file, value)
    end

    # A prefix for every key: a non-empty String of at most MAX_NAME_BYTES of UTF-8. nil means the
    # default: FERROLOCK_NAMESPACE, else "ferrolock" (so the `ferrolock` command, and any process
    # that does not load the app's initializer, can be pointed at the app's keys without code).
    def namespace=(value)
      @namespace = nil.equal?(value) ? self.class.default_namespace : Validate.text!(:namespace, value)
    end

    def connect_timeout=(value)
      @connect_timeout = self.class.timeout!(:connect_timeout, value)
    end

    def read_timeout=(value)
      @read_timeout = self.class.timeout!(:read_timeout, value)
    end

    # The most (seconds) one thread per client may poll for a reply before sleeping in the read;
    # within it, the poll lasts about 1.5 measured round trips. A nearby Redis answers sooner than
    # a sleeping thread wakes up, so this shortens round trips (59 -> 24 µs for a PING on the CI
    # VM) for a little CPU; nothing polls when replies take longer than this (a distant Redis).
    # 0 turns it off.
    def reply_spin=(value)
      @reply_spin = self.class.reply_spin!(value)
    end

    def logger=(value)
      unless Validate.responds_to?(value, :info) && Validate.responds_to?(value, :warn)
        raise TypeError, "logger must respond to #info and #warn, got #{Validate.class_of(value)}"
      end

      @logger = value
    end

    # Sidekiq's logger when Sidekiq is loaded, else a WARN-level logger on $stderr.
    def logger
      @logger ||= default_logger
    end

    # True once a logger is in place: set with logger=, or the default above already in use.
    def logger_set?
      !@logger.nil?
    end

    # A URL String, or :sidekiq (Sidekiq's own Redis, read when the client is built).
    def self.redis_url!(value)
      return value if value == :sidekiq
      raise TypeError, "redis_url must be a String or :sidekiq, got #{Validate.class_of(value)}" unless String === value # rubocop:disable Style/CaseEquality -- BasicObject-safe
      raise ArgumentError, "redis_url must not be empty" if value.empty?

      value
    end

    # The settings made, passwords hidden: IRB shows this for `Ferrolock.configure { … }`.
    def inspect
      settings = instance_variables.map do |ivar|
        "#{ivar.to_s.delete_prefix("@")}=#{shown_setting(ivar, instance_variable_get(ivar))}"
      end
      "#<#{self.class.name} #{settings.join(", ")}>"
    end
    alias to_s inspect

    # Off unless FERROLOCK_HISTORY=1 (or true, on): with it on, an uncontended DistMutex measured 3-5 %
    # slower on a loaded machine (doc/BENCHMARKS.md, history), not yet within the 3 % that history may
    # cost by default.
    def self.default_history = %w[1 true on].include?(ENV.fetch("FERROLOCK_HISTORY", "").downcase)

    def self.default_redis_url
      [ENV.fetch("FERROLOCK_REDIS_URL", nil), ENV.fetch("REDIS_URL", nil)].find { |url| url && !url.empty? } ||
        DEFAULT_URL
    end

    # FERROLOCK_NAMESPACE (checked like namespace=, errors naming the variable), else DEFAULT_NAMESPACE.
    def self.default_namespace
      value = ENV.fetch(NAMESPACE_ENV, nil)
      return DEFAULT_NAMESPACE if value.nil? || value.empty?

      Validate.text!(:namespace, value)
    rescue ArgumentError, TypeError => e
      raise ArgumentError, "#{NAMESPACE_ENV}: #{e.message}"
    end

    # A connect/read timeout: MIN_TTL_SECONDS (1 ms) up to MAX_SECONDS, like every TTL.
    def self.timeout!(name, value)
      Validate.seconds!(name, value)
    end

    def self.reply_spin!(value)
      value = Validate.float!(:reply_spin, value)
      unless value >= 0 && value <= MAX_REPLY_SPIN
        raise ArgumentError, "reply_spin must be between 0 and #{MAX_REPLY_SPIN} seconds, got #{value}"
      end

      value
    end

    private

    def shown_setting(ivar, value)
      return Validate.class_of(value).to_s if ivar == :@logger && value
      return Redact::MASK.inspect if Redact.secret_arg?(ivar) && !value.nil?

      Redact.text(value.inspect)
    end

    # FERROLOCK_REPLY_SPIN=0 turns polling off without a code change.
    def env_reply_spin
      value = ENV.fetch("FERROLOCK_REPLY_SPIN", nil)
      return nil if value.nil? || value.empty?

      self.class.reply_spin!(Float(value))
    rescue ArgumentError, TypeError => e
      raise ArgumentError, "FERROLOCK_REPLY_SPIN: #{e.message}"
    end

    def default_logger
      return ::Sidekiq.logger if defined?(::Sidekiq) && ::Sidekiq.respond_to?(:logger)

      Logger.new($stderr, level: Logger::WARN, progname: "ferrolock")
    end
  end

  extend Configuration::Current
end
