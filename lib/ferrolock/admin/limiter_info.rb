# frozen_string_literal: true

require_relative "reading"
require_relative "lease_info"

module Ferrolock
  class Admin
    # A ConcurrentLimiter as Redis has it. `limit` is the one stored by each acquisition that
    # takes a free slot: with callers passing different limits, the latest such caller's; nil
    # when no slot key exists (only waiters left, or a version that did not write it).
    # `local_limit` is what this process's own limiter of that name passes
    # (ConcurrentLimiter::LocalLimits; nil when it made none), so a process running the app's code
    # shows a mismatch with the stored one. `override`: the operators' LimitOverride::Override in
    # force (nil: none).
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

      # Live slots only (a slot whose lease ran out is free, as the scripts count it); nil when
      # neither a live slot, a waiter nor an override exists.
      def self.read(client, name)
        state = Reading.state(client, :concurrent_limiter, name) or return nil
        over = state[:override]
        new(name: name, limit: state[:limit], local_limit: ConcurrentLimiter::LocalLimits[client.namespace, name],
            slots: state[:slots].map { |slot| LeaseInfo.from(slot) }, waiting: state[:waiting],
            override: over && LimitOverride::Override.new(**over))
      end
    end
  end
end
