# frozen_string_literal: true

require_relative "../fake"

module Ferrolock
  module Testing
    module Fake
      # Native::ConcurrentLimiter in memory: at most `limit` slots held at once, waiters served
      # first come, first served. The latest caller to take a free slot stores its limit, as the
      # Redis script does (ConcurrentLimiter#status shows a different one).
      class ConcurrentLimiter
        # override: an operator's Admin::LimitOverride::Override (nil: none), as Redis keeps it.
        State = Struct.new(:slots, :line, :stored_limit, :override)

        # Admin::LimitOverride#write in memory: the Override now in force. Waiters try again at once.
        def self.override!(store, client, name, action, limit)
          store.synchronize do
            current = (store.table(:concurrent_limiter)[Fake.place(client, name)] ||= State.new([], [], nil))
            current.override = Admin::LimitOverride.after(current.override, action, limit)
            store.changed!
            current.override || Admin::LimitOverride::NONE
          end
        end

        # The Override in force for name (nil: none).
        def self.override(store, client, name)
          store.synchronize { store.table(:concurrent_limiter)[Fake.place(client, name)]&.override }
        end

        attr_reader :limit

        def initialize(store, client, name, limit, _lease, _min_replicas_acked, _local_passes, _fair) # rubocop:disable Metrics/ParameterLists -- Native::ConcurrentLimiter.new's
          @store = store
          @place = Fake.place(client, name)
          @name = name
          @limit = limit
        end

        # A slot, or nil when none freed within wait_timeout seconds.
        # (History counts nothing under Testing: no tally is passed, and one would be ignored.)
        def acquire(wait_timeout, _tally = nil)
          deadline = Ferrolock.monotonic + wait_timeout
          place_in_line = Object.new
          @store.synchronize do
            @store.await(deadline) { [attempt(place_in_line), nil] }
          ensure
            state.line.delete(place_in_line)
            @store.changed!
          end
        end

        def release(slot, _tally = nil)
          @store.synchronize do
            current = state
            unless current.slots.delete(slot)
              raise LockLost, "ConcurrentLimiter #{@name.inspect}: the slot's lease was lost while held " \
                              "(its lease passed without renewal)"
            end

            current.stored_limit = nil if current.slots.empty?
            @store.changed!
          end
          nil
        end

        # [in use, waiting]
        def status
          @store.synchronize do
            current = state
            [current.slots.size, current.line.size]
          end
        end

        # The limit stored by the latest caller to take a free slot; nil when no slot is held.
        def stored_limit
          @store.synchronize { state.stored_limit }
        end

        private

        def state
          @store.table(:concurrent_limiter)[@place] ||= State.new([], [], nil)
        end

        # The limit in force: 0 while paused, else the operator's, else this limiter's.
        def limit_in_force(current)
          over = current.override
          return @limit if over.nil?

          over.paused ? 0 : over.limit || @limit
        end

        def attempt(place_in_line)
          current = state
          current.line << place_in_line unless current.line.include?(place_in_line)
          return nil unless current.line.first.equal?(place_in_line) && current.slots.size < limit_in_force(current)

          current.stored_limit = @limit
          slot = LimiterSlot.new(self)
          current.slots << slot
          slot
        end
      end
    end
  end
end
