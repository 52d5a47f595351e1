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
      def self.read(client, name)
        state = Reading.state(client, :dist_mutex, name) or return nil
        new(name: name, token: state[:token], fencing_token: state[:fencing_token], ttl: state[:ttl],
            waiters: state[:waiters], holder: Holder.from_token(state[:token], fencing_token: state[:fencing_token]))
      end
    end
  end
end
