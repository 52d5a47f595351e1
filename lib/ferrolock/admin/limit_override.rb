# frozen_string_literal: true

module Ferrolock
  class Admin
    # An operator's override of a limit, live: another limit, or paused (no slot is taken or handed
    # on), for a ConcurrentLimiter or an ActiveJob limits_concurrency key; or a Shoryuken queue's lock
    # paused (Shoryuken::QueuePause reads it, about every second per process). The core owns it: the
    # limiter's and the key's own scripts write it and read it in the same atomic step as their
    # slots (ext/ferrolock-core/src/concurrent_limiter/limit_override.rs), so every process obeys
    # it from its next attempt; it survives restarts until cleared. Holders are never evicted.
    # Raising it, resuming or clearing lets the waiters in: a limiter's are woken at once; a key's
    # blocked jobs are promoted by the next visit of a process's ExpiryTimer (within a second).
    # Here: the arguments checked, the backend chosen (Testing's fake in fake mode), the event.
    module LimitOverride
      # How long an override lives without an admission reading it (seconds: the core's, 30 days).
      TTL = Native::ConcurrentLimiter::OVERRIDE_TTL
      ACTIONS = %i[set_limit pause resume clear].freeze
      KINDS = %i[concurrent_limiter limits_concurrency shoryuken_lock].freeze
      # The key part the override lives under (beside the slots it governs).
      PART = "override"
      Override = Struct.new(:limit, :paused, keyword_init: true) do
        def to_h
          { limit: limit, paused: paused }
        end
      end

      NONE = Override.new(limit: nil, paused: false).freeze

      module_function

      # Runs `action` on the override of `name` (a limiter's name, or a limits_concurrency key
      # "<group>/<key>") and returns the Override now in force.
      def write(client, name, action, limit = nil, kind: :concurrent_limiter)
        limit = Validate.positive_integer!(:limit, limit) if action == :set_limit
        raise ArgumentError, "action: must be one of #{ACTIONS.join(", ")}" unless ACTIONS.include?(action)
        if kind == :shoryuken_lock && action == :set_limit
          raise ArgumentError, "a Shoryuken queue's lock has no limit to set: pause, resume or clear it"
        end

        parse(backend_write(client, name, action, limit, kind)).tap do |now|
          payload = { primitive: kind, name: name, action: action, limit: now.limit, paused: now.paused }
          payload[:queue] = name if kind == :shoryuken_lock # (its events are counted per queue)
          Ferrolock.instrument(:limit_changed, payload)
        end
      end

      # The Override in force for `name` (a limiter's, "concurrency:<group>/<key>" or "msg:<queue>"),
      # nil when none (read by the core: concurrent_limiter/limit_override.rs). keep: a pause read
      # stays in Redis (its TTL renewed, as an admission's read renews a limiter's).
      def read(client, name, keep: false)
        return fake_read(client, name) if fake?

        reply = Native::ConcurrentLimiter.read_override(client.native, name, keep)
        reply && parse(reply)
      end

      # The Override after `action` on `was` (nil: none), as the core's script leaves it; nil when
      # none is left (Testing's fakes keep it so).
      def after(was, action, limit)
        now = (was || NONE).to_h
        now = case action
              when :set_limit then now.merge(limit: limit)
              when :pause then now.merge(paused: true)
              when :resume then now.merge(paused: false)
              else NONE.to_h
              end
        now[:limit] || now[:paused] ? Override.new(**now) : nil
      end

      # True for a limiter's name; false for a limits_concurrency key's or a Shoryuken queue's, whose
      # overrides share the limiters' key part under their kinds' prefixes.
      def limiter_name?(name)
        !name.start_with?(Reading.prefix(:limits_concurrency), Reading.prefix(:shoryuken_marker))
      end

      # The name `kind`'s override is stored under ("concurrency:<group>/<key>" for a key's, the
      # message markers' "msg:<queue>" for a Shoryuken queue's lock).
      def stored_name(name, kind)
        case kind
        when :limits_concurrency then "#{Reading.prefix(:limits_concurrency)}#{name}"
        when :shoryuken_lock then "#{Reading.prefix(:shoryuken_marker)}#{name}"
        else name
        end
      end

      def fake_read(client, name)
        key = name.delete_prefix(Reading.prefix(:limits_concurrency))
        return Testing::Fake::ConcurrentLimiter.override(Testing.store, client, name) if key == name

        Testing::Fake::JobConcurrency.override(Testing.store, client, key)
      end

      # [limit or nil, paused] from the limiter's or the key's backend.
      def backend_write(client, name, action, limit, kind)
        case kind
        when :concurrent_limiter
          if fake?
            Testing::Fake::ConcurrentLimiter.override!(Testing.store, client, name, action, limit).to_a
          else
            Native::ConcurrentLimiter.write_override(client.native, name, action.to_s, limit)
          end
        when :limits_concurrency
          Backend.build(:JobConcurrency, client).write_override(name, action.to_s, limit)
        when :shoryuken_lock # the limiters' override hash under the queue's name (nothing waits in its line)
          backend_write(client, stored_name(name, kind), action, limit, :concurrent_limiter)
        else
          raise ArgumentError, "kind: must be one of #{KINDS.map(&:inspect).join(", ")} (got #{Validate.show(kind)})"
        end
      end

      # Under Ferrolock::Testing.fake! (its factory installed, in fake mode) the override is the fake
      # limiters' (in memory), as they read it.
      def fake?
        Backend.factory&.fake? || false
      end

      def parse(reply)
        limit, paused = reply
        Override.new(limit: limit, paused: paused == true)
      end
    end
  end
end
