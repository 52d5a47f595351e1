# frozen_string_literal: true

require_relative "../fake"
require_relative "concurrency_key"

module Ferrolock
  module Testing
    module Fake
      # Native::JobConcurrency (limits_concurrency's, and concurrency_rule's places) in memory: the
      # same answers, one ConcurrencyKey per key. The timer's index of keys with blocked jobs is read
      # off the keys themselves: `due` lists those whose earliest lease ran out (or with no slot left).
      class JobConcurrency
        def initialize(store, client)
          @store = store
          @client = client
          @place = Fake.place(client, "concurrency")
        end

        # [outcome, fencing token, blocked count, [[job_id, payload, promotion], ...]]; policy: [to,
        # duration, on_conflict ("block" or "discard"), max_blocked (0: none)]; promotion: the copy's.
        def admit(key, job_id, payload, at_perform, policy, promotion) # rubocop:disable Metrics/ParameterLists -- the native's
          raise ArgumentError, "job_id: must not be empty" if job_id.empty?
          raise ArgumentError, "to: must be at least 1" unless policy[0].positive?

          limit, lease, on_conflict, max_blocked = policy
          policy = [limit, ms(lease), on_conflict, max_blocked]
          change(key) { |entry, now| entry.admit(job_id, payload, at_perform, policy, now, promotion) }
        end

        # The performing job's slot: renewed (it never runs out) until released or kept.
        def running(key, job_id, _lease, fence)
          @store.synchronize { entry(key).renew(job_id) }
          JobSlot.new(self, key, job_id, fence)
        end

        # [held, promoted]; nil when this slot was released or kept already.
        def release(slot, limit)
          released(change(slot.key) { |entry, now| slot.finish! && entry.release(slot.job_id, limit, now) })
        end

        # [held, promoted]: the slot (or place in line) of a job that will not perform.
        def give_back(key, job_id, limit, promotion)
          released(change(key) { |entry, now| entry.release(job_id, limit, now, promotion) })
        end

        # Stops renewing: the slot keeps the lease its resumption's admission gave it.
        def keep(slot)
          @store.synchronize do
            next false unless slot.finish!

            entry(slot.key).stop_renewing(slot.job_id)
            true
          end
        end

        def reap(key, _claim)
          change(key) { |entry, now| entry.release(nil, nil, now) }.last
        end

        # [keys due, their claim, seconds until the next one is due or nil].
        def due(recheck)
          @store.synchronize do
            now = ms(Testing.now)
            visits = keys.filter_map { |key, entry| (at = entry.due_at) && [key, at] }
            due, later = visits.partition { |_, at| at <= now }
            next_at = later.map(&:last).min
            [due.map(&:first), now + ms(recheck), next_at && ((next_at - now) / 1000.0)]
          end
        end

        def key_part(key, part)
          @client.key("concurrency:#{key}", part)
        end

        def due_key
          @client.key("concurrency", "due")
        end

        # [limit or nil, paused]: the operators' override of `key` after `action`, as
        # job_concurrency/override.lua leaves it. The blocked jobs it lets in are promoted by the
        # timer's next visit, as in Redis.
        def write_override(key, action, limit)
          @store.synchronize do
            current = entry(key)
            current.override = Admin::LimitOverride.after(current.override, action.to_sym, limit)
            @store.changed!
            (current.override || Admin::LimitOverride::NONE).to_a
          end
        end

        # The Override in force for `key` of client (nil: none).
        def self.override(store, client, key)
          store.synchronize { store.table(:job_concurrency)[Fake.place(client, "concurrency")]&.dig(key)&.override }
        end

        # Whether the slot went while held (Testing.reset!).
        def lost?(slot)
          @store.synchronize { !keys[slot.key]&.slot?(slot.job_id) }
        end

        private

        # This client's keys (server and namespace) in the store.
        def keys
          @store.table(:job_concurrency)[@place] ||= {}
        end

        def entry(key)
          keys[key] ||= ConcurrencyKey.new
        end

        def change(key)
          @store.synchronize { yield entry(key), ms(Testing.now) }
        end

        def released(reply)
          return nil unless reply

          held, promoted = reply
          [held == 1, promoted]
        end

        def ms(seconds)
          (seconds * 1000).floor
        end
      end
    end
  end
end
