# frozen_string_literal: true

require_relative "eviction_check"
require_relative "topology"

module Ferrolock
  # A Redis client shared by threads (a small pool of connections in Rust).
  #
  #   client = Ferrolock::Client.new(url: "redis://:secret@127.0.0.1:6379/0")
  #   client.call("SET", "greeting", "hello") # => "OK"
  #   Ferrolock::Client.new(cluster: ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
  #   Ferrolock::Client.new(name: "mymaster", sentinels: ["redis://10.0.0.1:26379", { host: "10.0.0.2" }])
  #
  # Primitives accept one with `client:`; Ferrolock.client is the default.
  class Client
    OPTIONS = (%i[url cluster sentinels namespace connect_timeout read_timeout tls_ca_file reply_spin] +
               Topology::SENTINEL_OPTIONS).freeze

    # url:, namespace:, connect_timeout:, read_timeout:, reply_spin:, tls_ca_file: default to
    # Ferrolock.config; tls_ca_file: a PEM bundle to trust for rediss:// (nil: the system's roots).
    # Instead of url:, cluster: (seed nodes) or sentinels: with name: (the primary's name),
    # sentinel_username:, sentinel_password: (for the sentinels), username:, password:, db: (for
    # the primary); see Topology.
    def initialize(**options)
      unknown = options.keys - OPTIONS
      raise ArgumentError, "unknown keyword#{"s" if unknown.size > 1}: #{unknown.join(", ")}" unless unknown.empty?

      @native = native_client(options, Ferrolock.config)
      @eviction_check = EvictionCheck.new(@native, redacted_url)
    end

    # The Ferrolock::Native::Client that primitives pass to their native constructors. The first
    # use also starts the one-off maxmemory-policy check (see EvictionCheck).
    def native
      @eviction_check.start
      @native
    end

    # The background maxmemory-policy check (specs wait on it with #join).
    attr_reader :eviction_check

    # Runs any Redis command: call("SET", "k", "v", "PX", 500).
    def call(*args)
      @eviction_check.start
      @native.call(*args)
    end

    def ping
      @eviction_check.start
      @native.ping
    end

    # True when Redis runs Lua scripts (every ferrolock change is one). Raises Ferrolock::Error naming
    # the server and what is missing when it will not (Valkey 9.1+ without its Lua engine, EVAL or
    # EVALSHA renamed away, an ACL user without +@scripting); Ferrolock::ConnectionError when Redis is
    # down. The Railtie runs it at Sidekiq's boot.
    def check_scripting!
      @native.call("EVAL", "return 1", "0") == 1
    end

    def namespace
      @native.namespace
    end

    # Seconds a thread may poll for a reply before sleeping (0.0: never).
    def reply_spin
      @native.reply_spin
    end

    # The URL with its password replaced by ***; for a cluster or sentinels, their nodes.
    def redacted_url
      @native.redacted_url
    end

    # "<namespace>:{<name>}:<part>": every key of one primitive shares a hash slot. The native
    # layer checks the name (non-empty, no braces); both must be Strings of valid UTF-8.
    def key(name, part)
      @native.key(key_text(:name, name), key_text(:part, part))
    end

    def inspect
      "#<#{self.class.name} #{redacted_url} namespace=#{namespace.inspect}>"
    end
    alias to_s inspect

    private

    def native_client(options, config)
      setting = ->(name, default) { options.fetch(name) { config.public_send(default) } }
      kind, where = Topology.pick(options, config)
      Native::Client.new(
        kind == :url ? url_option(where) : where.fetch("cluster") { where.fetch("sentinels") }.first,
        Validate.text!(:namespace, setting.call(:namespace, :namespace)),
        Configuration.timeout!(:connect_timeout, setting.call(:connect_timeout, :connect_timeout)),
        Configuration.timeout!(:read_timeout, setting.call(:read_timeout, :read_timeout)),
        Validate.path!(:tls_ca_file, setting.call(:tls_ca_file, :tls_ca_file)),
        Configuration.reply_spin!(setting.call(:reply_spin, :reply_spin)),
        kind == :url ? nil : where
      )
    end

    def url_option(value)
      value = Ferrolock::Sidekiq::Compat.redis_url if value == :sidekiq
      string_option(:url, value)
    end

    # A non-empty String of valid UTF-8 (the native layer takes UTF-8 only), as UTF-8.
    def string_option(name, value)
      raise TypeError, "#{name} must be a String, got #{Validate.class_of(value)}" unless String === value # rubocop:disable Style/CaseEquality -- BasicObject-safe
      raise ArgumentError, "#{name} must not be empty" if value.empty?

      Validate.utf8!(name, value)
    end

    # A String of valid UTF-8 for #key (a part may be empty; the name is checked natively).
    def key_text(arg, value)
      raise TypeError, "#{arg} must be a String, got #{Validate.show(value)}" unless String === value # rubocop:disable Style/CaseEquality -- BasicObject-safe

      Validate.utf8!(arg, value)
    end
  end
end
