# frozen_string_literal: true

require_relative "../fake"

module Ferrolock
  module Testing
    module Fake
      # Native::DualLock in memory: one duplicate runs, one waits for it, any further one is skipped.
      class DualLock
        State = Struct.new(:running, :waiting)

        attr_reader :key

        def initialize(store, client, key, _wait_lease, _lease, _min_replicas_acked) # rubocop:disable Metrics/ParameterLists -- Native::DualLock.new's
          @store = store
          @place = Fake.place(client, key)
          @key = key
        end

        # (wait_timeout: the real one bounds its round trip by it; nothing to bound in memory)
        def enter(_wait_timeout = nil)
          @store.synchronize do
            current = entry
            if current.running.nil?
              current.running = DualLockTicket.new(self, :running)
            elsif current.waiting.nil?
              current.waiting = DualLockTicket.new(self, :waiting)
            else
              DualLockTicket.new(self, :skipped)
            end
          end
        end

        # :running once the running duplicate left; :waiting when wait_timeout seconds (nil: no limit)
        # passed first (the ticket then gave up its place).
        def wait(ticket, wait_timeout)
          deadline = wait_timeout && (Ferrolock.monotonic + wait_timeout)
          @store.synchronize do
            return ticket.stage if @store.await(deadline) { [take_turn(ticket), nil] }

            give_up(ticket)
            :waiting
          end
        end

        # Frees the ticket's place; Ferrolock::LockLost when a running ticket no longer held it.
        def leave(ticket)
          @store.synchronize do
            lost = ticket.stage == :running && !entry.running.equal?(ticket)
            give_up(ticket)
            if lost
              raise LockLost, "DualLock #{@key.inspect}: the EXEC lock expired or was taken by another duplicate " \
                              "while running"
            end
          end
          nil
        end

        # [running?, waiting?]
        def state
          @store.synchronize do
            current = entry
            [!current.running.nil?, !current.waiting.nil?]
          end
        end

        private

        def entry
          @store.table(:dual_lock)[@place] ||= State.new(nil, nil)
        end

        def take_turn(ticket)
          current = entry
          return false unless current.running.nil?

          current.waiting = nil if current.waiting.equal?(ticket)
          current.running = ticket
          ticket.stage = :running
        end

        def give_up(ticket)
          current = entry
          current.running = nil if current.running.equal?(ticket)
          current.waiting = nil if current.waiting.equal?(ticket)
          ticket.stage = :left
          @store.changed!
        end
      end
    end
  end
end
