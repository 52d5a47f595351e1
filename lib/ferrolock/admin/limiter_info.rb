# frozen_string_literal: true

require_relative "reading"
require_relative "holder"

module Ferrolock
  class Admin
    # One live slot of a limiter: its token, the lease left (seconds), its holder.
    SlotInfo = Struct.new(:token, :ttl, :holder, keyword_init: true) do
      def to_h
        super.merge(holder: holder&.to_h)
      end
    end

    # A ConcurrentLimiter as Redis has it. `limit` is the slots set's '{limit}' member (scored
    # -limit), written by each acquisition that takes a free slot: with callers passing
    # different limits, the latest such caller's; nil when no slot key exists (only waiters
    # left, or a version that did not write it). `local_limit` is what this process's own
    # limiter of that name passes (ConcurrentLimiter::LocalLimits; nil when it made none), so a
    # process running the app's code shows a mismatch with the stored one.
    # The slots set's member holding the limit (not a token: tokens have no braces); see
    # lua/concurrent_limiter/acquire.lua.
    LIMIT_MEMBER = "{limit}"

    # `override`: the operators' LimitOverride::Override in force (nil: none).
    LimiterInfo = Struct.new(:name, :limit, :local_limit, :slots, :waiting, :override, keyword_init: true) do
      def kind
        :concurrent_limiter
      end

      def in_use
        slots.size
      end

      def held?
        !slots.empty?
      end

      def to_h
        { kind: kind, name: name, limit: limit, local_limit: local_limit, in_use: in_use, waiting: waiting,
          override: override&.to_h, slots: slots.map(&:to_h) }
      end

      # Live entries only (a slot whose lease ran out is free, as the scripts count it); nil when
      # neither a live slot nor a waiter exists.
      def self.read(client, keys, name)
        now = Reading.now_ms(client)
        live = "(#{now}"
        entries = client.call("ZRANGEBYSCORE", keys.key(name, "slots"), live, "+inf", "WITHSCORES")
        waiting = Reading.line_length(client, keys.key(name, "line"))
        override = LimitOverride.read(client, keys, name)
        return nil if entries.empty? && waiting.zero? && override.nil?

        limit = client.call("ZSCORE", keys.key(name, "slots"), LIMIT_MEMBER)
        new(name: name, limit: limit && -Float(limit).to_i,
            local_limit: ConcurrentLimiter::LocalLimits[client.namespace, name], slots: slots(entries, now),
            waiting: waiting, override: override)
      end

      # SlotInfos of the slots set's live entries (token, expiry pairs).
      def self.slots(entries, now)
        entries.each_slice(2).map do |token, expiry|
          SlotInfo.new(token: token, ttl: (Float(expiry) - now) / 1000.0, holder: Holder.from_token(token))
        end
      end
    end
  end
end
