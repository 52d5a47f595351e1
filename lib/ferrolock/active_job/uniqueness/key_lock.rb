# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      # One lock on a key taken as it is (outside ferrolock's namespace): the value is the holder's
      # token, always with an expiry. Taken with SET-if-free PX, released and renewed only by the
      # token holding it, each one script in the Rust core (ext/ferrolock-core/lua/unique_lock).
      # Redlock takes the same key with SET NX PX, so activejob-uniqueness and ferrolock exclude
      # each other.
      class KeyLock
        attr_reader :key
        alias digest key # (Unique::Leases' log lines name it)

        def initialize(key, client:)
          @key = Validate.text!(:key, key)
          @native = Backend.build(:KeyLock, Validate.client!(client), @key)
        end

        # nil when token holds the lock now (for ttl seconds), else the value holding it. keep: a
        # lock this token holds already keeps its expiry.
        def take(token, ttl, keep: false)
          @native.take(token, ttl.to_f, keep ? true : false)
        end

        def release(token) = @native.release(token)
        def expire(token, ttl) = @native.expire(token, ttl.to_f)
        def hand_over(from, to, ttl) = @native.hand_over(from, to, ttl.to_f)
        def holder = @native.holder
      end
    end
  end
end
