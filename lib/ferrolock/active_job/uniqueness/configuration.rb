# frozen_string_literal: true

require "openssl"

module Ferrolock
  module ActiveJob
    module Uniqueness
      # ActiveJob::Uniqueness.configure { |c| … }: activejob-uniqueness' settings, plus `client` (the
      # Ferrolock::Client the locks live on) and `lease` (seconds a running job's lock outlives a dead
      # process: it is renewed while the job runs).
      class Configuration
        CONFLICT_ACTIONS = %i[log raise].freeze
        # redlock_options' default: Redlock's one try, which is what ferrolock does anyway.
        DEFAULT_REDLOCK_OPTIONS = { retry_count: 0 }.freeze

        attr_accessor :lock_ttl, :lock_prefix, :digest_method, :lock_strategies
        attr_reader :on_conflict, :on_redis_connection_error, :redlock_servers, :redlock_options, :lease

        def initialize
          @lock_ttl = 86_400 # 1 day
          @lock_prefix = "activejob_uniqueness"
          @on_conflict = :raise
          @on_redis_connection_error = :raise
          @lock_strategies = {}
          @lease = 30
          @redlock_servers = nil
          @redlock_options = DEFAULT_REDLOCK_OPTIONS
          @client = nil
          @redlock_client = nil
          @digest_method = OpenSSL::Digest::MD5
        end

        def on_conflict=(action)
          validate_on_conflict_action!(action)
          @on_conflict = action
        end

        def on_redis_connection_error=(action)
          validate_on_redis_connection_error!(action)
          @on_redis_connection_error = action
        end

        def lease=(seconds)
          @lease = Validate.seconds!(:lease, seconds)
        end

        def validate_on_conflict_action!(action)
          return if action.nil? || CONFLICT_ACTIONS.include?(action) || action.respond_to?(:call)

          raise InvalidOnConflictAction, "Unexpected '#{action}' action on conflict"
        end

        def validate_on_redis_connection_error!(action)
          return if action.nil? || action == :raise || action.respond_to?(:call)

          raise InvalidOnConflictAction, "Unexpected '#{action}' action on_redis_connection_error"
        end

        # Redlock's servers: ferrolock locks on one Redis, so one URL becomes the client's; several
        # (a Redlock quorum) or a client object are warned about and Ferrolock.client is used.
        def redlock_servers=(servers)
          @redlock_servers = servers
          @redlock_client = nil
          urls = Array(servers)
          return if urls.size == 1 && urls.first.is_a?(String)

          Ferrolock.log(:warn, "ferrolock: ActiveJob::Uniqueness redlock_servers #{Redact.text(urls.inspect)}: " \
                               "ferrolock locks on one Redis; give one URL or set `client` " \
                               "(using Ferrolock.client)")
        end

        # Accepted for compatibility; Redlock's retries and drift do not apply (one SET NX PX, leases).
        def redlock_options=(options)
          @redlock_options = options
          return if options.nil? || options == DEFAULT_REDLOCK_OPTIONS

          Ferrolock.log(:warn, "ferrolock: ActiveJob::Uniqueness redlock_options #{options.inspect} are ignored " \
                               "(ferrolock takes a lock with one SET NX PX and renews it while the job runs)")
        end

        attr_writer :client

        # The client the locks live on: `client`, else redlock_servers' one URL, else Ferrolock.client.
        def client
          @client || (@redlock_client ||= redlock_client) || Ferrolock.client
        end

        private

        def redlock_client
          urls = Array(@redlock_servers)
          return nil unless urls.size == 1 && urls.first.is_a?(String)

          Ferrolock::Client.new(url: urls.first)
        end
      end
    end
  end
end
