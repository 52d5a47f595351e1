# frozen_string_literal: true

require_relative "validate"
require_relative "configuration/topology_settings"

module Ferrolock
  # Where a client connects: one server (url:), a Redis Cluster (cluster: seed nodes) or a
  # Sentinel-managed primary (name: + sentinels:). Client.new's options win over the
  # configuration as a whole: giving any of url:, cluster:, sentinels: ignores the configured ones.
  # Nodes are URLs or, as redis-client accepts them, {host:, port:, username:, password:, ssl:}
  # hashes, turned into URLs here so the native layer parses one form.
  module Topology
    # Client.new keywords that only mean something with sentinels:.
    SENTINEL_OPTIONS = %i[name sentinel_username sentinel_password username password db].freeze
    # Each of them as a Configuration setting.
    CONFIG_SETTINGS = SENTINEL_OPTIONS.to_h do |key|
      [key, key == :name ? :redis_sentinel_name : :"redis_#{key}"]
    end.freeze
    NODE_KEYS = %i[host port username password ssl].freeze
    DEFAULT_PORTS = { cluster: 6379, sentinels: 26_379 }.freeze
    # The characters a URL's user and password may hold unescaped (RFC 3986 unreserved).
    UNRESERVED = /[^A-Za-z0-9\-._~]/

    module_function

    # From Client.new's options (and the configuration when they name no server): either
    # [:url, url] or [:cluster | :sentinel, Hash for Native::Client.new].
    def pick(options, config)
      chosen = %i[url cluster sentinels].select { |key| options.key?(key) }
      raise ArgumentError, "give only one of url:, cluster:, sentinels: (got #{chosen.join(", ")})" if chosen.size > 1

      unless options.key?(:sentinels)
        stray = SENTINEL_OPTIONS.find { |key| options.key?(key) }
        raise ArgumentError, "#{stray}: is only used with sentinels:" if stray
      end
      return from_options(chosen.first, options) if chosen.any?

      from_config(config)
    end

    def from_options(kind, options)
      case kind
      when :url then [:url, options[:url]]
      when :cluster then cluster(:cluster, options[:cluster])
      else sentinel(:sentinels, options)
      end
    end

    def from_config(config)
      if config.redis_cluster && config.redis_sentinels
        raise ArgumentError, "redis_cluster and redis_sentinels are both set: choose one"
      end
      return cluster(:redis_cluster, config.redis_cluster) if config.redis_cluster
      return [:url, config.redis_url] unless config.redis_sentinels

      options = SENTINEL_OPTIONS.to_h { |key| [key, config.public_send(CONFIG_SETTINGS.fetch(key))] }
      sentinel(:redis_sentinels, options.merge(sentinels: config.redis_sentinels))
    end

    def cluster(arg, nodes)
      [:cluster, { "cluster" => nodes!(arg, nodes, DEFAULT_PORTS[:cluster]) }]
    end

    # arg is :sentinels (Client.new) or :redis_sentinels (the configuration): errors name the
    # keyword or the setting the bad value came from.
    def sentinel(arg, options)
      setting = ->(key) { arg == :sentinels ? key : CONFIG_SETTINGS.fetch(key) }
      # nil.equal?, not value.nil?: a BasicObject has no nil? (Validate's rule).
      if nil.equal?(options[:name])
        raise ArgumentError, "#{setting.call(:name)} (the primary's name in the sentinels) is required with #{arg}"
      end

      spec = { "sentinels" => nodes!(arg, options[:sentinels], DEFAULT_PORTS[:sentinels]),
               "master_name" => Validate.text!(setting.call(:name), options[:name]),
               "db" => Validate.count!(setting.call(:db), options[:db] || 0, min: 0) }
      %i[sentinel_username sentinel_password username password].each do |key|
        spec[key.to_s] = Validate.text!(setting.call(key), options[key]) unless nil.equal?(options[key])
      end
      [:sentinel, spec]
    end

    # A non-empty Array of URLs / node hashes, as URLs.
    def nodes!(arg, nodes, default_port)
      unless Array === nodes # rubocop:disable Style/CaseEquality -- BasicObject-safe
        raise TypeError, "#{arg} must be an Array of redis:// URLs or {host:, port:} Hashes, " \
                         "got #{Validate.show(nodes)}"
      end
      raise ArgumentError, "#{arg} must not be empty" if nodes.empty?

      nodes.each_with_index.map { |node, i| node!("#{arg}[#{i}]", node, default_port) }
    end

    def node!(arg, node, default_port)
      case node
      when String then url!(arg, node)
      when Hash then node_url(arg, node.transform_keys { |key| node_key(arg, key) }, default_port)
      else raise TypeError, "#{arg} must be a redis:// URL String or a {host:, port:} Hash, got #{Validate.show(node)}"
      end
    end

    def url!(arg, url)
      url = Validate.text!(arg, url)
      return url if url.start_with?("redis://", "rediss://")

      raise ArgumentError, "#{arg} must be a redis:// or rediss:// URL, got #{Validate.show(url)}"
    end

    # A node Hash's key as a Symbol (a String's to_sym raises on bytes that are not UTF-8); a
    # key of another type stays as it is, and is then reported as unknown.
    def node_key(arg, key)
      case key
      when String then Validate.utf8!("#{arg} key", key).to_sym
      else key
      end
    end

    def node_url(arg, node, default_port)
      unknown = node.keys - NODE_KEYS
      raise ArgumentError, "#{arg} has unknown key#{"s" if unknown.size > 1} #{unknown.join(", ")}" if unknown.any?

      host = Validate.text!("#{arg}[:host]", node[:host])
      host = "[#{host}]" if host.include?(":") && !host.start_with?("[") # an IPv6 address
      scheme = Validate.boolean!("#{arg}[:ssl]", node.fetch(:ssl, false)) ? "rediss" : "redis"
      "#{scheme}://#{userinfo(arg, node)}#{host}:#{port!(arg, node.fetch(:port, default_port))}"
    end

    def port!(arg, port)
      raise TypeError, "#{arg}[:port] must be an Integer, got #{Validate.show(port)}" unless Integer === port # rubocop:disable Style/CaseEquality -- BasicObject-safe
      raise ArgumentError, "#{arg}[:port] must be 1..65535, got #{port}" unless (1..65_535).cover?(port)

      port
    end

    # "user:password@", ":password@" or "" (escaped: the native layer unescapes them).
    def userinfo(arg, node)
      user, password = %i[username password].map do |key|
        node[key].nil? ? nil : escape(Validate.text!("#{arg}[:#{key}]", node[key]))
      end
      return "" if user.nil? && password.nil?

      "#{user}#{":#{password}" if password}@"
    end

    def escape(text)
      text.b.gsub(UNRESERVED) { |byte| format("%%%02X", byte.ord) }
    end
  end
end
