# frozen_string_literal: true

require_relative "reading"
require_relative "holder"

module Ferrolock
  class Admin
    # A DistMutex as Redis has it: the holder's token, its fencing token (the fence counter's
    # last value), the TTL left (seconds), the waiters in line, and who holds it (Holder; nil for
    # a token without holder metadata).
    MutexInfo = Struct.new(:name, :token, :fencing_token, :ttl, :waiters, :holder, keyword_init: true) do
      def kind
        :dist_mutex
      end

      def held?
        !token.nil?
      end

      def to_h
        { kind: kind }.merge(super).merge(holder: holder&.to_h)
      end

      # nil when nothing of this mutex is in Redis.
      def self.read(client, keys, name)
        token = client.call("GET", keys.key(name, "lock"))
        waiters = Reading.line_length(client, keys.key(name, "waiters"))
        return nil if token.nil? && waiters.zero?

        fence = client.call("GET", keys.key(name, "fence"))
        fence &&= Integer(fence, exception: false)
        new(name: name, token: token, fencing_token: fence,
            ttl: Reading.ttl(client.call("PTTL", keys.key(name, "lock"))), waiters: waiters,
            holder: Holder.from_token(token, fencing_token: fence))
      end
    end
  end
end
