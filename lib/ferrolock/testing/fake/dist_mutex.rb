# frozen_string_literal: true

require_relative "../fake"

module Ferrolock
  module Testing
    module Fake
      # Native::DistMutex in memory. Waiters are served first come, first served; only an
      # expiry-only lock (auto_release: false) frees itself, `expire` seconds after it was taken.
      class DistMutex
        State = Struct.new(:hold, :expires_at, :fencing_token, :line)

        def initialize(store, client, name, expire, auto_release, _lease, _min_replicas_acked, _local_passes, _fair, # rubocop:disable Metrics/ParameterLists -- Native::DistMutex.new's
                       fencing)
          @fencing = fencing
          @store = store
          @place = Fake.place(client, name)
          @name = name
          @expire = expire
          @auto_release = auto_release
        end

        # A hold, or Ferrolock::TimeoutError after timeout seconds (nil: waits as long as it takes).
        # (History counts nothing under Testing: no tally is passed, and one would be ignored.)
        def lock(timeout, _tally = nil)
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
        def unlock(hold, _tally = nil)
          @store.synchronize { release(hold) }
          nil
        end

        # DistMutex#sleep's release and wait (see Store#release_then_sleep): true when woken,
        # false once timeout seconds passed. deferred: an exception was queued, deferred by the
        # caller's own mask, as the sleep began: it sleeps on, as Mutex#sleep does; one queued
        # since (during the release) ends it at once.
        def release_and_sleep(hold, timeout, deferred, _tally)
          @store.release_then_sleep(timeout) do
            release(hold)
            hold.released_by_sleep = true
            deferred || !Thread.pending_interrupt?
          end
        end

        # The hold's owner ended (DistMutex::Owners): released now, so that no thread sees a dead
        # owner's lock held; the unlock that follows finds it released. A hold lost meanwhile is
        # left for that unlock to report.
        def announce_release(hold)
          @store.synchronize do
            next unless @auto_release && state.hold.equal?(hold)

            release(hold)
            hold.announced = true
          end
          nil
        end

        def locked?
          @store.synchronize { !free?(state) }
        end

        private

        # Inside synchronize; see unlock.
        def release(hold)
          return unless @auto_release

          current = state
          if current.hold.equal?(hold)
            current.hold = nil
            @store.changed!
          elsif !hold.announced?
            raise LockLost, "DistMutex #{@name.inspect}: the lock expired or was taken by another owner while held"
          end
        end

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
          current.hold = MutexHold.new(self, (current.fencing_token if @fencing))
          current.expires_at = @auto_release ? nil : Testing.now + @expire
          current.hold
        end
      end
    end
  end
end
