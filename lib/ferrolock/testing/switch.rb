# frozen_string_literal: true

module Ferrolock
  module Testing
    # A primitive's native object once ferrolock/testing is loaded: each call goes to the backend
    # of the mode in force (the Native object, made on first real use so fake mode never touches
    # the client's connection; the in-memory one; the always-granting one). What an acquisition
    # returned goes back to the backend that made it, whatever the mode is by then.
    class Switch
      # Methods whose first argument came from an acquisition.
      GIVE_BACK = %i[unlock release leave wait finish abort_message keep].freeze
      # Those arguments when Redis made them.
      NATIVE_TOKENS = [Native::MutexHold, Native::LimiterSlot, Native::DualLockTicket, Native::MessageLease,
                       Native::JobSlot].freeze

      def initialize(kind, client, args)
        @kind = kind
        @client = client
        @args = args
        @fake = Fake.const_get(kind, false).new(Testing.store, client, *args)
        @disabled = Disabled.const_get(kind, false).new(client, *args)
        @real = nil
        @lock = ::Mutex.new
      end

      def inspect
        "#<#{self.class.name} #{@kind} mode=#{Testing.mode}>"
      end

      private

      def method_missing(name, *args, &block)
        target = backend
        return super unless target.respond_to?(name)

        target = owner(args.first) || target if GIVE_BACK.include?(name)
        target.public_send(name, *args, &block)
      end

      def respond_to_missing?(name, include_private = false)
        backend.respond_to?(name) || super
      end

      def backend
        case Testing.mode
        when :fake then @fake
        when :disabled then @disabled
        else real
        end
      end

      def real
        @real || @lock.synchronize { @real ||= Native.const_get(@kind, false).new(@client.native, *@args) }
      end

      # The backend that made token, or nil when it is no acquisition's (a jid, say).
      def owner(token)
        case token
        when Token then token.backend
        when *NATIVE_TOKENS then real
        end
      end
    end
  end
end
