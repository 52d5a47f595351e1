# frozen_string_literal: true

require_relative "holder"

module Ferrolock
  class Admin
    # A held stage: a DualLock's EXEC (the duplicate running) or WAIT (the one waiting), or a
    # uniqueness digest's run-time lock: its token, the TTL left (seconds) and holder (Holder).
    Stage = Struct.new(:token, :ttl, :holder, keyword_init: true) do
      # From a state's `{token:, ttl:}` (Native::Admin.state); nil for nil.
      def self.from(fields)
        fields && new(token: fields[:token], ttl: fields[:ttl], holder: Holder.from_token(fields[:token]))
      end

      def to_h
        super.merge(holder: holder&.to_h)
      end
    end
  end
end
