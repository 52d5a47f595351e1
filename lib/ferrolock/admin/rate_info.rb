# frozen_string_literal: true

require_relative "rate_definition"

module Ferrolock
  class Admin
    # A RateLimiter as Redis has it. Redis keeps only its state (a counter, a log of call times
    # or an arrival time), not its count or interval: those come from the app's own RateLimiter of
    # that name and kind when it exists in this process (the Web tab in the app, `--require` for
    # the command; `known` true), and then `remaining` is what the limiter's own status script
    # answers. Without it: limit, interval and remaining are nil, `reset_in` comes from the key's
    # TTL (every script sets it to the time the limiter is full again), and `reserved` is known
    # for a sliding window only (future entries of its log).
    # `reserved`: calls that reserved a later slot and are sleeping until it (nil for points: a
    # call's cost is not stored, so the calls behind a points limiter's arrival time are unknown).
    # The reading is the core's (rate_limiter/inspect.rs, Native::Admin.rate_state).
    RateInfo = Struct.new(:name, :kind, :limit, :interval, :burst, :remaining, :reset_in, :reserved, :known,
                          keyword_init: true) do
      # nil when the key is gone. `definition`: the app's RateLimiter of that name and kind, or nil.
      def self.read(client, name, part, definition)
        args = definition && [definition.limit, definition.interval, definition.burst || 0]
        state = Native::Admin.rate_state(client.native, name, part, args) or return nil
        kind = state[:kind].to_sym
        new(name: name, kind: kind, limit: definition&.limit, interval: definition&.interval,
            burst: (definition.burst if definition && kind == :leaky), remaining: state[:remaining],
            reset_in: state[:reset_in], reserved: state[:reserved], known: state[:known])
      end

      # The kind (RateLimiter's, a Symbol) whose key has this part, or nil.
      def self.kind_of(part)
        @kinds ||= Native::Admin.rate_kinds.transform_values(&:to_sym).freeze
        @kinds[part]
      end

      # { [name, kind] => Definition } of this process's live RateLimiters in `namespace`; with
      # several of one name and kind, the largest count. Once per listing page.
      def self.definitions(namespace)
        Native::RateLimiter.definitions(namespace).to_h do |name, kind, limit, interval, burst|
          kind = kind.to_sym
          [[name, kind], RateDefinition.new(name: name, kind: kind, limit: limit, interval: interval, burst: burst)]
        end
      end
    end
  end
end
