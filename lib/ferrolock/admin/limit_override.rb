# frozen_string_literal: true

module Ferrolock
  class Admin
    # An operator's override of a ConcurrentLimiter's limit, live: another limit, or paused (no
    # slot is taken or handed on). It is a hash at `<ns>:{<name>}:override` (fields `limit`,
    # `paused`, `ttl`) that the limiter's acquire and release scripts read in the same atomic step
    # as the slots (lua/concurrent_limiter/{acquire,release}.lua), so every process obeys it from
    # its next attempt; no process caches it. It survives restarts until cleared, and expires only
    # after TTL without any acquisition of the limiter (each one refreshes it), like every key
    # ferrolock writes. Holders are never evicted: a limit lowered below them lets nobody in until
    # fewer hold a slot than the new limit. Raising it, resuming or clearing wakes the waiters in line
    # (they attempt again at once; a grant of 0 hands over nothing, src/line/handoff.rs).
    module LimitOverride
      # How long an override lives without an acquisition reading it (30 days).
      TTL = 30 * 24 * 3600
      ACTIONS = %i[set_limit pause resume clear].freeze
      Override = Struct.new(:limit, :paused, keyword_init: true) do
        def to_h
          { limit: limit, paused: paused }
        end
      end

      NONE = Override.new(limit: nil, paused: false).freeze

      # KEYS[1] the override, KEYS[2] the line; ARGV[1] the action, ARGV[2] the limit (set_limit),
      # ARGV[3] the TTL (ms), ARGV[4] the grant lists' prefix, ARGV[5] the inbox channels' prefix.
      # Returns {limit or false, paused 0/1}. The wake publishes "token|0" to a waiter's inbox, or
      # pushes 0 to its grant list (not in KEYS: who waits is read here, as release.lua does).
      WRITE = <<~LUA
        local action, ttl = ARGV[1], ARGV[3]
        if action == 'clear' then
          redis.call('DEL', KEYS[1])
        elseif action == 'resume' then
          redis.call('HDEL', KEYS[1], 'paused')
          if redis.call('HEXISTS', KEYS[1], 'limit') == 0 then redis.call('DEL', KEYS[1]) end
        elseif action == 'pause' then
          redis.call('HSET', KEYS[1], 'paused', '1', 'ttl', ttl)
          redis.call('PEXPIRE', KEYS[1], ttl)
        else
          redis.call('HSET', KEYS[1], 'limit', ARGV[2], 'ttl', ttl)
          redis.call('PEXPIRE', KEYS[1], ttl)
        end
        if action ~= 'pause' and redis.call('TYPE', KEYS[2]).ok == 'list' then
          local t = redis.call('TIME')
          local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
          for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, 999)) do
            local who, deadline, inbox = string.match(entry, '^(.*)|(%d+)|@(%w+)$')
            if not who then who, deadline = string.match(entry, '^(.*)|(%d+)$') end
            if who and tonumber(deadline) > now then
              if inbox then
                redis.pcall('PUBLISH', ARGV[5] .. inbox, who .. '|0')
              else
                local list = ARGV[4] .. who
                local pushed = redis.pcall('RPUSH', list, '0')
                if type(pushed) == 'number' then redis.call('PEXPIRE', list, tonumber(deadline) - now + 1000) end
              end
            end
          end
        end
        local state = redis.call('HMGET', KEYS[1], 'limit', 'paused')
        return {state[1] or false, state[2] == '1' and 1 or 0}
      LUA

      module_function

      # Runs `action` on limiter `name`'s override and returns the Override now in force.
      def write(client, keys, name, action, limit = nil)
        limit = Validate.positive_integer!(:limit, limit) if action == :set_limit
        raise ArgumentError, "action: must be one of #{ACTIONS.join(", ")}" unless ACTIONS.include?(action)

        changed = if fake?
                    Testing::Fake::ConcurrentLimiter.override!(Testing.store, client, name, action, limit)
                  else
                    parse(client.call("EVAL", WRITE, 2, keys.key(name, "override"), keys.key(name, "line"),
                                      action.to_s, limit.to_s, TTL * 1000, keys.key(name, "grant:"),
                                      "#{client.namespace}:inbox:"))
                  end
        changed.tap do |now|
          Ferrolock.instrument(:limit_changed, primitive: :concurrent_limiter, name: name, action: action,
                                               limit: now.limit, paused: now.paused)
        end
      end

      # The Override in force for `name`, nil when none.
      def read(client, keys, name)
        return Testing::Fake::ConcurrentLimiter.override(Testing.store, client, name) if fake?

        limit, paused = client.call("HMGET", keys.key(name, "override"), "limit", "paused")
        return nil if limit.nil? && paused.nil?

        Override.new(limit: limit && Integer(limit), paused: paused == "1")
      end

      # The Override after `action` on `was` (nil: none), as WRITE leaves it; nil when none is left.
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

      # Under Ferrolock::Testing.fake! (its factory installed, in fake mode) the override is the fake
      # limiters' (in memory), as they read it.
      def fake?
        Backend.factory&.fake? || false
      end

      def parse(reply)
        limit, paused = reply
        Override.new(limit: limit ? Integer(limit) : nil, paused: paused == 1)
      end
    end
  end
end
