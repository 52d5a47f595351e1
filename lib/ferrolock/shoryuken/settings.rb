# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # The options in force for one (chain, worker) pair, validated once and reused: Shoryuken
    # builds a new middleware instance per message, so nothing here may cost a round trip.
    class Settings
      attr_reader :lease, :processed_ttl, :on_redis_error, :idempotency_key, :paused_delay

      def initialize(options)
        options = Options::DEFAULTS.merge(options)
        @enabled = options[:enabled]
        @lease = options[:lease].to_f
        @processed_ttl = options[:processed_ttl].to_f
        @on_redis_error = options[:on_redis_error]
        @client = options[:client]
        @idempotency_key = options[:idempotency_key]
        @paused_delay = options[:paused_delay]
        # Shared by threads; only this memo changes, and two threads building a MessageLock
        # at once is harmless (each is a thin handle on the shared client).
        @message_lock = nil
      end

      def enabled?
        @enabled
      end

      # The MessageLock for these settings, on the given client or Ferrolock.client (rebuilt
      # when Ferrolock.configure replaced the default client). One per process, never per message.
      def message_lock
        client = @client || Ferrolock.client
        lock = @message_lock
        return lock if lock&.client.equal?(client)

        @message_lock = MessageLock.new(lease: lease, processed_ttl: processed_ttl, client: client)
      end
    end
  end
end
