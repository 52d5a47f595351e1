# frozen_string_literal: true

require_relative "reading"

module Ferrolock
  class Admin
    # The key name prefix of RateLimiters (`<ns>:{rate:<name>}:<part>`, rate_limiter.rs).
    RATE_PREFIX = "rate:"
    # The key part of each kind (rate_limiter.rs Algorithm::key_part).
    RATE_PARTS = { "window" => :window, "log" => :sliding_window, "bucket" => :bucket, "tat" => :leaky,
                   "points" => :points }.freeze

    # What the app's RateLimiter of a name and kind passes (RateInfo.definitions).
    RateDefinition = Struct.new(:name, :kind, :limit, :interval, :burst, keyword_init: true)

    # A RateLimiter as Redis has it. Redis keeps only its state (a counter, a log of call times
    # or an arrival time), not its count or interval: those come from the app's own RateLimiter of
    # that name and kind when it exists in this process (the Web tab in the app, `--require` for
    # the command; `known` true), and then `remaining` is what the limiter's own status script
    # answers. Without it: limit, interval and remaining are nil, `reset_in` comes from the key's
    # TTL (every script sets it to the time the limiter is full again), and `reserved` is known
    # for a sliding window only (future entries of its log).
    # `reserved`: calls that reserved a later slot and are sleeping until it (nil for points: a
    # call's cost is not stored, so the calls behind a points limiter's arrival time are unknown).
    RateInfo = Struct.new(:name, :kind, :limit, :interval, :burst, :remaining, :reset_in, :reserved, :known,
                          keyword_init: true) do
      # nil when the key is gone. `definition`: the app's RateLimiter of that name and kind, or nil.
      def self.read(client, keys, name, part, definition)
        kind = RATE_PARTS[part] or return nil
        key = keys.key("#{RATE_PREFIX}#{name}", part)
        pttl = client.call("PTTL", key)
        return nil if pttl == -2

        now_us = now_us(client)
        info = new(name: name, kind: kind, known: !definition.nil?, reset_in: Reading.ttl(pttl),
                   reserved: kind == :sliding_window ? client.call("ZCOUNT", key, "(#{now_us}", "+inf") : nil)
        definition ? with_definition(info, client, key, now_us, definition) : info
      end

      def self.with_definition(info, client, key, now_us, definition)
        remaining, reset_in = Native::RateLimiter.new(client.native, info.name, info.kind.to_s, definition.limit,
                                                      definition.interval, definition.burst).status
        info.limit = definition.limit
        info.interval = definition.interval
        info.burst = definition.burst if info.kind == :leaky
        info.remaining = remaining
        info.reset_in = reset_in
        reader = info.kind == :window ? :window_reserved : :gcra_reserved
        info.reserved ||= send(reader, client, key, now_us, definition)
        info
      end

      # Calls in windows after the current one (lua/rate_limiter/window.lua): every window before
      # the latest one with a call is full, so they wait for the earlier ones.
      def self.window_reserved(client, key, now_us, definition)
        latest, used = client.call("HMGET", key, "w", "n").map { |v| v && Integer(v, exception: false) }
        return 0 if latest.nil? || used.nil?

        current = now_us / interval_us(definition)
        latest > current ? [((latest - current - 1) * definition.limit) + used, 0].max : 0
      end

      # Calls whose slot is after now (lua/rate_limiter/gcra.lua): the last call's slot is the TAT it
      # left minus one emission and the tolerance, each earlier one an emission before.
      def self.gcra_reserved(client, key, now_us, definition)
        return nil if definition.kind == :points

        tat = client.call("HGET", key, "t") or return 0
        emission = interval_us(definition).to_f / definition.limit
        tolerance = emission * (definition.kind == :leaky ? definition.burst : definition.limit - 1)
        [(((Float(tat) - tolerance - now_us) / emission) - 1e-9).ceil - 1, 0].max
      end

      # As rate_limiter.rs: the interval's whole µs.
      def self.interval_us(definition)
        (definition.interval * 1_000_000_000).round / 1000
      end

      def self.now_us(client)
        seconds, micros = client.call("TIME")
        (Integer(seconds) * 1_000_000) + Integer(micros)
      end

      # { [name, kind] => Definition } of this process's live RateLimiters in `namespace`; with
      # several of one name and kind, the largest count. Once per listing page.
      def self.definitions(namespace)
        Native::RateLimiter.definitions(namespace).to_h do |name, kind, limit, interval, burst|
          kind = kind.to_sym
          [[name, kind], RateDefinition.new(name: name, kind: kind, limit: limit, interval: interval, burst: burst)]
        end
      end
      private_class_method :with_definition, :window_reserved, :gcra_reserved, :interval_us, :now_us
    end
  end
end
