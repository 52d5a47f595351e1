# frozen_string_literal: true

module Ferrolock
  # Configuration's Redis Cluster and Sentinel settings.
  class Configuration
    # Configuration includes this module, kept apart so the shared Configuration stays small. Each
    # one left nil (the default) is read from its environment variable, if set:
    #
    #   Ferrolock.configure { |c| c.redis_cluster = ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"] }
    #   Ferrolock.configure do |c|
    #     c.redis_sentinels = ["redis://10.0.0.1:26379", { host: "10.0.0.2", port: 26_379 }]
    #     c.redis_sentinel_name = "mymaster"
    #   end
    #
    # The default client uses redis_cluster if set, else redis_sentinels, else redis_url.
    module TopologySettings
      # Setting => environment variable read while the setting is nil.
      ENV_VARIABLES = {
        redis_cluster: "FERROLOCK_REDIS_CLUSTER",
        redis_sentinels: "FERROLOCK_REDIS_SENTINELS",
        redis_sentinel_name: "FERROLOCK_REDIS_SENTINEL_NAME",
        redis_sentinel_username: "FERROLOCK_REDIS_SENTINEL_USERNAME",
        redis_sentinel_password: "FERROLOCK_REDIS_SENTINEL_PASSWORD",
        redis_username: "FERROLOCK_REDIS_USERNAME",
        redis_password: "FERROLOCK_REDIS_PASSWORD",
        redis_db: "FERROLOCK_REDIS_DB"
      }.freeze

      # Seed nodes of a Redis Cluster: redis:// URLs or {host:, port:, username:, password:, ssl:}
      # hashes. FERROLOCK_REDIS_CLUSTER: URLs separated by commas.
      def redis_cluster
        @redis_cluster || env_list(:redis_cluster)
      end

      def redis_cluster=(value)
        Topology.nodes!(:redis_cluster, value, Topology::DEFAULT_PORTS[:cluster]) unless nil.equal?(value)
        @redis_cluster = value&.dup&.freeze
      end

      # The sentinels of a Sentinel-managed primary (URLs or hashes, as redis_cluster), with
      # redis_sentinel_name. FERROLOCK_REDIS_SENTINELS: URLs separated by commas.
      def redis_sentinels
        @redis_sentinels || env_list(:redis_sentinels)
      end

      def redis_sentinels=(value)
        Topology.nodes!(:redis_sentinels, value, Topology::DEFAULT_PORTS[:sentinels]) unless nil.equal?(value)
        @redis_sentinels = value&.dup&.freeze
      end

      # The primary's name in the sentinels' configuration ("mymaster").
      # redis_sentinel_username/_password: the sentinels' own credentials (a sentinel URL's win);
      # redis_username/_password/_db: the primary's (and the replica's it fails over to).
      %i[redis_sentinel_name redis_sentinel_username redis_sentinel_password redis_username
         redis_password].each do |setting|
        define_method(setting) { instance_variable_get(:"@#{setting}") || env_text(setting) }
        define_method(:"#{setting}=") do |value|
          instance_variable_set(:"@#{setting}", nil.equal?(value) ? nil : Validate.text!(setting, value))
        end
      end

      def redis_db
        return @redis_db if @redis_db

        text = env_text(:redis_db)
        text && Validate.count!(:redis_db, Integer(text, 10), min: 0)
      rescue ArgumentError, TypeError => e
        raise ArgumentError, "#{ENV_VARIABLES[:redis_db]}: #{e.message}"
      end

      def redis_db=(value)
        @redis_db = nil.equal?(value) ? nil : Validate.count!(:redis_db, value, min: 0)
      end

      private

      def env_text(setting)
        value = ENV.fetch(ENV_VARIABLES.fetch(setting), nil)
        value.nil? || value.strip.empty? ? nil : value.strip
      end

      def env_list(setting)
        env_text(setting)&.split(/[\s,]+/)&.reject(&:empty?)
      end
    end

    include TopologySettings
  end
end
