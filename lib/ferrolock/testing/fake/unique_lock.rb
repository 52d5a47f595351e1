# frozen_string_literal: true

require_relative "../fake"

module Ferrolock
  module Testing
    module Fake
      # Native::UniqueLock in memory: one digest's lock holds a jid until its expiry (Testing.now).
      class UniqueLock
        Held = Struct.new(:jid, :expires_at)

        attr_reader :key

        def initialize(store, client, digest)
          @store = store
          @place = Fake.place(client, digest)
          @key = client.key(digest, "lock")
        end

        # nil when jid holds the lock now (for ttl seconds; keep: a lock it held keeps its
        # expiry), else the jid holding it.
        def take(jid, ttl, keep)
          @store.synchronize do
            held = current
            return held.jid if held && held.jid != jid
            return nil if held && keep

            locks[@place] = Held.new(jid, Testing.now + ttl)
            nil
          end
        end

        def release(jid)
          @store.synchronize do
            next false unless current&.jid == jid

            locks.delete(@place)
            true
          end
        end

        def expire(jid, ttl)
          @store.synchronize do
            held = current
            next false unless held&.jid == jid

            held.expires_at = Testing.now + ttl
            true
          end
        end

        def hand_over(from_jid, to_jid, ttl)
          @store.synchronize do
            next false unless current&.jid == from_jid

            locks[@place] = Held.new(to_jid, Testing.now + ttl)
            true
          end
        end

        def holder
          @store.synchronize { current&.jid }
        end

        private

        def locks
          @store.table(:unique_lock)
        end

        # The live lock (an expired one is removed), or nil.
        def current
          Fake.live(locks, @place, &:expires_at)
        end
      end
    end
  end
end
