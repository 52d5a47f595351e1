# frozen_string_literal: true

require "uri"

module Ferrolock
  module Sidekiq
    # What differs between the Sidekiq versions ferrolock supports (6.4–8.x), in one place. Tested
    # against Sidekiq 6.4.1 and 7.3.10 (bin/test rspec and rspec_sidekiq7) and 8.1 (bin/test modern,
    # Ruby 3.3). Sidekiq 8 made job timestamps (created_at, enqueued_at) epoch milliseconds, which
    # ferrolock never reads ("at", which it writes, stays in seconds); it renamed ActiveJob's wrapper
    # (Ferrolock::Job::SIDEKIQ_WRAPPER_SUFFIXES) and changed how Web extensions register (web.rb).
    # Sidekiq 9 is untested, so it is refused (see check!) rather than assumed to work.
    module Compat
      SUPPORTED = Gem::Requirement.new(">= 6.4", "< 9")
      TESTED = "6.4.1, 7.3.10 and 8.1.7"

      module_function

      @accepted = nil

      # Raises Ferrolock::Error when the loaded Sidekiq is one ferrolock does not support; does
      # nothing while Sidekiq is not loaded (a check runs again when a middleware is used).
      def check!(version = loaded_version)
        return true if version.nil? || version == @accepted # cheap: middlewares check on every job

        if SUPPORTED.satisfied_by?(Gem::Version.new(version))
          @accepted = version
          return true
        end

        raise Ferrolock::Error,
              "ferrolock #{Ferrolock::VERSION} supports Sidekiq #{SUPPORTED} (tested on #{TESTED}), " \
              "but Sidekiq #{version} is loaded: its job format and APIs are not verified with ferrolock " \
              "(README, \"Supported versions\"). Use Sidekiq 6.4 to 8.x."
      end

      # Runs for every job (check!): not `defined?(::Sidekiq::VERSION)`, whose hidden rescue would
      # swallow a Sidekiq::Shutdown (Thread#raise) landing inside it (see Validate.duration?).
      def loaded_version
        ::Sidekiq::VERSION if Object.const_defined?(:Sidekiq) && ::Sidekiq.const_defined?(:VERSION, false)
      end

      # Every queue this Sidekiq server process fetches: on 7+, the queues of every capsule
      # (`config.capsule(...)`); on 6.4, Sidekiq.options[:queues]. Repeated by weight, as Sidekiq
      # keeps them.
      def fetched_queues
        raise Ferrolock::Error, "needs Sidekiq loaded" unless defined?(::Sidekiq)

        if ::Sidekiq.respond_to?(:default_configuration)
          config = ::Sidekiq.default_configuration
          config.capsules.empty? ? Array(config[:queues]) : config.capsules.each_value.flat_map(&:queues)
        else
          Array(::Sidekiq.options[:queues])
        end
      end

      # The URL of Sidekiq's own Redis, password included, for `c.redis_url = :sidekiq`: read from a
      # connection of Sidekiq's pool (redis-client's config on 7, redis-rb's client on 6.4), so it is
      # whatever Sidekiq resolved (its `config.redis = {...}`, REDIS_URL, REDIS_PROVIDER...).
      def redis_url
        raise Ferrolock::Error, "redis_url :sidekiq: Sidekiq is not loaded (require \"sidekiq\" first)" unless
          Object.const_defined?(:Sidekiq) && ::Sidekiq.respond_to?(:redis)

        check!
        if ::Sidekiq.respond_to?(:default_configuration)
          ::Sidekiq.default_configuration.redis_pool.with { |conn| url_from(conn.config) }
        else
          ::Sidekiq.redis { |conn| url_from(conn._client) }
        end
      end

      # redis-client's Config and redis-rb 4's Client both answer these.
      def url_from(settings)
        db = settings.db.to_i
        return unix_url(settings, db) if settings.path

        auth = settings.password ? "#{escape(settings.username || "")}:#{escape(settings.password)}@" : ""

        host = settings.host.count(":") >= 2 ? "[#{settings.host}]" : settings.host
        tls = settings.respond_to?(:ssl?) ? settings.ssl? : settings.scheme == "rediss"
        "redis#{"s" if tls}://#{auth}#{host}:#{settings.port}/#{db}"
      end

      # Credentials of a unix socket URL go in its query (user=, pass=).
      def unix_url(settings, db)
        query = { "db" => db, "user" => settings.username, "pass" => settings.password }.compact
        "unix://#{settings.path}?#{URI.encode_www_form(query)}"
      end

      def escape(text)
        URI.encode_www_form_component(text.to_s).gsub("+", "%20")
      end

      # About how often Sidekiq moves due jobs from its scheduled set to their queues (seconds): its
      # poll_interval_average if set, else average_scheduled_poll_interval (default 5; the set is
      # polled that often across all processes).
      def scheduled_poll_interval
        config = ::Sidekiq.respond_to?(:default_configuration) ? ::Sidekiq.default_configuration : ::Sidekiq.options
        (config[:poll_interval_average] || config[:average_scheduled_poll_interval] || 5).to_f
      rescue StandardError
        5.0
      end
    end
  end
end
