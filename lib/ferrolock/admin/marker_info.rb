# frozen_string_literal: true

require_relative "reading"
require_relative "holder"

module Ferrolock
  class Admin
    # A Shoryuken message marker: :in_progress with the delivery's token and holder while a copy
    # runs, :processed once done (until processed_ttl ends).
    MarkerInfo = Struct.new(:queue, :message_id, :state, :token, :ttl, :holder, keyword_init: true) do
      def kind
        :shoryuken_marker
      end

      def name
        "#{Reading.prefix(:shoryuken_marker)}#{queue}:#{message_id}"
      end

      def to_h
        { kind: kind }.merge(super).merge(holder: holder&.to_h)
      end

      # nil for a name that is no marker's, or a marker that is gone.
      def self.read(client, name)
        state = Reading.state(client, :shoryuken_marker, name) or return nil
        new(queue: state[:queue], message_id: state[:message_id], state: state[:state].to_sym,
            token: state[:token], ttl: state[:ttl], holder: Holder.from_token(state[:token]))
      end
    end
  end
end
