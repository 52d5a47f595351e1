# frozen_string_literal: true

require_relative "holder"

module Ferrolock
  class Admin
    # One live slot of a limiter: its token, the lease left (seconds), its holder (nil for a
    # limits_concurrency slot, whose token is a job_id: no process metadata).
    SlotInfo = Struct.new(:token, :ttl, :holder, keyword_init: true) do
      # From a state's `{token:, ttl:}` (Native::Admin.state); `holder: false` for a job's slot.
      def self.from(fields, holder: true)
        new(token: fields[:token], ttl: fields[:ttl], holder: holder ? Holder.from_token(fields[:token]) : nil)
      end

      def to_h
        super.merge(holder: holder&.to_h)
      end
    end
  end
end
