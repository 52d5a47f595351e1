# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    module Unique
      # One digest's uniqueness lock: a single key `<namespace>:{<digest>}:lock` whose value is the jid
      # of the job holding it, always with an expiry. Every change is one script in the Rust core
      # (ext/ferrolock-core/lua/unique_lock: compare the jid, then write), so a job never releases or
      # extends a lock a duplicate now holds. Scripts are routed by their key on a Redis Cluster.
      class Lock
        attr_reader :digest, :key

        def initialize(digest, client: nil)
          @digest = Validate.name!(:digest, digest)
          @native = Backend.build(:UniqueLock, Validate.client!(client), @digest)
          @key = @native.key
        end

        # nil when jid holds the lock now (for ttl seconds), else the jid holding it. keep: a lock
        # this jid already holds keeps its expiry (until_expired).
        def take(jid, ttl, keep: false)
          @native.take(Validate.text!(:jid, jid), span(ttl), keep ? true : false)
        end

        # True when jid held the lock and it is now free.
        def release(jid)
          @native.release(Validate.text!(:jid, jid))
        end

        # Sets the lock's expiry to ttl seconds from now if jid holds it; false when it does not.
        def expire(jid, ttl)
          @native.expire(Validate.text!(:jid, jid), span(ttl))
        end

        # Hands the lock from from_jid to to_jid for ttl seconds (on_conflict: :replace); false
        # when from_jid no longer holds it.
        def hand_over(from_jid, to_jid, ttl)
          @native.hand_over(Validate.text!(:from_jid, from_jid), Validate.text!(:to_jid, to_jid), span(ttl))
        end

        # The jid holding the lock, or nil.
        def holder
          @native.holder
        end

        private

        # A ttl in seconds as a Float. Callers add a job's delay (up to MAX_SECONDS) to ttl, so
        # the sum may pass MAX_SECONDS: capped there (10 years) rather than refused.
        def span(ttl)
          Validate.seconds!(:ttl, Validate.float!(:ttl, ttl).clamp(..MAX_SECONDS))
        end
      end
    end
  end
end
