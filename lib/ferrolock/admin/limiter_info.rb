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

    # A ConcurrentLimiter as Redis has it. `limit` is not stored in Redis (each caller passes
    # its own), so it is nil until holder metadata records it.
    LimiterInfo = Struct.new(:name, :limit, :slots, :waiting, keyword_init: true) do
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
        { kind: kind, name: name, limit: limit, in_use: in_use, waiting: waiting, slots: slots.map(&:to_h) }
      end

      # Live entries only (a slot whose lease ran out is free, as the scripts count it); nil when
      # neither a live slot nor a waiter exists.
      def self.read(client, keys, name)
        now = Reading.now_ms(client)
        live = "(#{now}"
        entries = client.call("ZRANGEBYSCORE", keys.key(name, "slots"), live, "+inf", "WITHSCORES")
        waiting = Reading.live_waiters(client, keys.key(name, "waiters"), live)
        return nil if entries.empty? && waiting.zero?

        slots = entries.each_slice(2).map do |token, expiry|
          SlotInfo.new(token: token, ttl: (Float(expiry) - now) / 1000.0,
                       holder: Holder.read(client, keys, name, token))
        end
        new(name: name, limit: nil, slots: slots, waiting: waiting)
      end
    end
  end
end
