# frozen_string_literal: true

require_relative "reading"
require_relative "holder"

module Ferrolock
  class Admin
    MARKER_PREFIX = "msg:"

    # A Shoryuken message marker (`<ns>:{msg:<queue>:<message_id>}:state`): :in_progress with the
    # delivery's token and holder while a copy runs, :processed once done (until processed_ttl
    # ends).
    MarkerInfo = Struct.new(:queue, :message_id, :state, :token, :ttl, :holder, keyword_init: true) do
      def kind
        :shoryuken_marker
      end

      def name
        "#{MARKER_PREFIX}#{queue}:#{message_id}"
      end

      def to_h
        { kind: kind }.merge(super).merge(holder: holder&.to_h)
      end

      # [queue, message_id] of a marker's name, or nil. SQS queue names have no ':'.
      def self.split(name)
        return nil unless name.start_with?(MARKER_PREFIX)

        queue, message_id = name.delete_prefix(MARKER_PREFIX).split(":", 2)
        message_id && [queue, message_id]
      end

      def self.read(client, keys, name)
        parts = split(name) or return nil
        queue, message_id = parts
        value = client.call("GET", keys.key(name, "state")) or return nil
        processed = value == "processed"
        token = processed ? nil : value
        new(queue: queue, message_id: message_id, state: processed ? :processed : :in_progress,
            token: token, ttl: Reading.ttl(client.call("PTTL", keys.key(name, "state"))),
            holder: Holder.from_token(token))
      end
    end
  end
end
