# frozen_string_literal: true

require_relative "../fake"

module Ferrolock
  module Testing
    module Fake
      # Native::DistMutex in memory. Waiters are served first come, first served; only an
      # expiry-only lock (auto_release: false) frees itself, `expire` seconds after it was taken.
      class DistMutex
        State = Struct.new(:hold, :expires_at, :fencing_token, :line)

        def initialize(store, client, name, expire, auto_release, _lease, _min_replicas_acked, _local_passes) # rubocop:disable Metrics/ParameterLists -- Native::DistMutex.new's
          @store = store
          @place = Fake.place(client, name)
          @name = name
          @expire = expire
          @auto_release = auto_release
        end

        # A hold, or Ferrolock::TimeoutError after timeout seconds (nil: waits as long as it takes).
        def lock(timeout)
          deadline = timeout && (Ferrolock.monotonic + timeout)
          place_in_line = Object.new
          @store.synchronize do
            hold = begin
              @store.await(deadline) { attempt(place_in_line) }
            ensure
              state.line.delete(place_in_line)
              @store.changed!
            end
            hold or raise TimeoutError, "DistMutex #{@name.inspect}: not acquired before the timeout"
          end
        end

        def try_lock
          @store.synchronize do
            current = state
            grant(current) if free?(current) && current.line.empty?
          end
        end

        # A no-op for an expiry-only lock; Ferrolock::LockLost when the hold is not the lock's now.
        def unlock(hold)
          return nil unless @auto_release

          @store.synchronize do
            current = state
            unless current.hold.equal?(hold)
              raise LockLost, "DistMutex #{@name.inspect}: the lock expired or was taken by another owner while held"
            end

            current.hold = nil
            @store.changed!
          end
          nil
        end

        def locked?
          @store.synchronize { !free?(state) }
        end

        private

        def state
          @store.table(:dist_mutex)[@place] ||= State.new(nil, nil, 0, [])
        end

        # [hold, nil] once it is this waiter's turn and the lock is free; else [nil, expiry].
        def attempt(place_in_line)
          current = state # (a reset! meanwhile makes a new one: join its line)
          current.line << place_in_line unless current.line.include?(place_in_line)
          return [grant(current), nil] if free?(current) && current.line.first.equal?(place_in_line)

          [nil, current.expires_at]
        end

        def free?(current)
          current.hold.nil? || (!current.expires_at.nil? && Testing.now >= current.expires_at)
        end

        def grant(current)
          current.fencing_token += 1
          current.hold = MutexHold.new(self, current.fencing_token)
          current.expires_at = @auto_release ? nil : Testing.now + @expire
          current.hold
        end
      end
    end
  end
end
