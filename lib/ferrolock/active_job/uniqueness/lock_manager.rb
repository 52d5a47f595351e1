# frozen_string_literal: true

require "securerandom"
require_relative "../../sidekiq/unique/leases"

module Ferrolock
  module ActiveJob
    module Uniqueness
      # The locks of ActiveJob::Uniqueness on Ferrolock's client. The strategies take a lock with
      # the job's job_id as its token, so a retry_on retry or a continuation's resumption (same
      # job_id) finds its own lock, and nobody frees a lock another job holds now.
      class LockManager
        SCAN_COUNT = 1000

        # client: nil follows ActiveJob::Uniqueness.config.client (looked up at each call).
        def initialize(client = nil)
          @client = client
        end

        # activejob-uniqueness' LockManager#lock(resource, ttl in ms): a lock under a random token
        # (the token when taken, else false), as Redlock takes it.
        def lock(resource, ttl, token = SecureRandom.uuid)
          take(resource, token, ttl / 1000.0).nil? ? token : false
        end

        # nil when token holds resource now, else the value holding it.
        def take(resource, token, ttl, keep: false)
          key_lock(resource).take(token, ttl, keep: keep)
        end

        # True when token held resource and it is free now.
        def release(resource, token)
          key_lock(resource).release(token)
        end

        # Frees a lock someone else took (activejob-uniqueness, which frees by key), only while
        # `value` still holds it: handed to a one-off token, then released by it.
        def release_value(resource, value)
          lock = key_lock(resource)
          token = "ferrolock-release-#{SecureRandom.uuid}"
          lock.hand_over(value, token, 1) && lock.release(token)
        end

        def expire(resource, token, ttl)
          key_lock(resource).expire(token, ttl)
        end

        def hand_over(resource, from, to, ttl)
          key_lock(resource).hand_over(from, to, ttl)
        end

        def holder(resource)
          key_lock(resource).holder
        end

        # Renews resource (token's) every lease/3 until #drop (see Sidekiq::Unique::Leases).
        def hold(resource, token, lease)
          Ferrolock::Sidekiq::Unique::Leases.hold(key_lock(resource), token, lease)
        end

        def drop(resource, token)
          Ferrolock::Sidekiq::Unique::Leases.drop(key_lock(resource), token)
        end

        # Deletes a lock whoever holds it (unlock!, and custom strategies written for the old gem).
        def delete_lock(resource)
          client.call("DEL", resource)
          true
        end

        # Deletes every lock matching a SCAN pattern (ActiveJob::Uniqueness.unlock!): SCAN, never KEYS,
        # on each master of a Redis Cluster in turn; each key UNLINKed on its own (keys of one page may
        # sit in different slots).
        def delete_locks(wildcard)
          node = 0
          cursor = "0"
          loop do
            cursor, keys, masters = Native::Admin.scan(client.native, node, cursor, wildcard, SCAN_COUNT)
            keys.each { |key| client.call("UNLINK", key) }
            next unless cursor == "0"

            node += 1
            break if node >= masters
          end
          true
        end

        private

        def client
          @client || Uniqueness.config.client
        end

        def key_lock(resource)
          KeyLock.new(resource, client: client)
        end
      end
    end
  end
end
