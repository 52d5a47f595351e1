# frozen_string_literal: true

require "securerandom"

module Ferrolock
  module Testing
    # What a fake or disabled acquisition hands out (a hold, slot, ticket or lease): it remembers
    # the backend that made it, so its release reaches that backend after the mode changed.
    class Token
      attr_reader :backend, :id

      def initialize(backend)
        @backend = backend
        @id = SecureRandom.uuid
      end
    end

    # Native::MutexHold's interface.
    class MutexHold < Token
      attr_reader :fencing_token

      def initialize(backend, fencing_token)
        super(backend)
        @fencing_token = fencing_token
      end
    end

    # Native::LimiterSlot's interface.
    class LimiterSlot < Token
      def token
        id
      end
    end

    # Native::DualLockTicket's interface: :running, :waiting, :skipped or :left.
    class DualLockTicket < Token
      attr_accessor :stage

      def initialize(backend, stage)
        super(backend)
        @stage = stage
      end
    end

    # Native::MessageLease's interface; place: the message's key in the store.
    class MessageLease < Token
      attr_reader :place
      attr_writer :lost

      def initialize(backend, place)
        super(backend)
        @place = place
      end

      def lost?
        @lost ? true : false
      end
    end
  end
end
