# frozen_string_literal: true

require_relative "../fake"

module Ferrolock
  module Testing
    module Fake
      # Native::MessageLock in memory: a message is free, in progress (a lease, renewed while its
      # job runs) or processed (until processed_ttl passed, in Testing.now).
      class MessageLock
        State = Struct.new(:lease, :processed_until)

        attr_reader :lease, :processed_ttl

        def initialize(store, client, lease, processed_ttl)
          @store = store
          @client = client
          @lease = lease
          @processed_ttl = processed_ttl
        end

        # A lease, :processed or :in_progress.
        def begin_message(queue, message_id)
          place = Fake.place(@client, queue, message_id)
          @store.synchronize do
            state = current(place)
            next :processed if state&.processed_until
            next :in_progress if state

            lease = MessageLease.new(self, place)
            messages[place] = State.new(lease, nil)
            lease
          end
        end

        # :marked, :lapsed (nothing left of the lease: marked anyway) or :lost (another delivery's).
        def finish(lease)
          @store.synchronize do
            state = current(lease.place)
            outcome = if state.nil? then :lapsed
                      elsif state.lease.equal?(lease) then :marked
                      end
            next (lease.lost = true) && :lost unless outcome

            messages[lease.place] = State.new(nil, Testing.now + @processed_ttl)
            outcome
          end
        end

        # True when the lease was the message's (now free again).
        def abort_message(lease)
          @store.synchronize do
            next false unless current(lease.place)&.lease.equal?(lease)

            messages.delete(lease.place)
            true
          end
        end

        def state_key(queue, message_id)
          @client.key("msg:#{queue}:#{message_id}", "state")
        end

        private

        def messages
          @store.table(:message_lock)
        end

        # The message's state; a processed mark past its time is removed (nil).
        def current(place)
          Fake.live(messages, place, &:processed_until)
        end
      end
    end
  end
end
