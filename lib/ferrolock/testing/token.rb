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

    # Native::MutexHold's interface. released_by_sleep: set once DistMutex#sleep released it (the
    # sleep takes the lock again). announced: its owner ended and its release was announced.
    class MutexHold < Token
      attr_reader :fencing_token
      attr_writer :released_by_sleep, :announced

      def initialize(backend, fencing_token)
        super(backend)
        @fencing_token = fencing_token
        @released_by_sleep = false
        @announced = false
      end

      def released_by_sleep?
        @released_by_sleep
      end

      def announced?
        @announced
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

    # Native::JobSlot's interface: a performing job's slot on a limits_concurrency key. Its fence
    # goes once it is released or kept, as the native slot's does.
    class JobSlot < Token
      attr_reader :key, :job_id

      def initialize(backend, key, job_id, fence)
        super(backend)
        @key = key
        @job_id = job_id
        @fence = fence
        @done = false
      end

      def fence
        @done ? nil : @fence
      end

      # True when the slot went while held (Testing.reset!): nothing renews it any more.
      def lost?
        !@done && backend.lost?(self)
      end

      # Marks it released or kept; false when it was already (a slot is given back once).
      def finish!
        return false if @done

        @done = true
      end
    end
  end
end
