# frozen_string_literal: true

require_relative "holder"

module Ferrolock
  class Admin
    # One lease held under a name: a limiter's slot, a DualLock's EXEC (the duplicate running) or
    # WAIT (the one waiting), a uniqueness digest's run-time lock, a limits_concurrency key's slot.
    # Its token, the TTL left (seconds) and its holder (Holder; nil for a limits_concurrency slot,
    # whose token is a job_id: no process metadata).
    LeaseInfo = Struct.new(:token, :ttl, :holder, keyword_init: true) do
      # From a state's `{token:, ttl:}` (Native::Admin.state), nil for nil; `holder: false` for a
      # job's slot.
      def self.from(fields, holder: true)
        return nil unless fields

        new(token: fields[:token], ttl: fields[:ttl], holder: holder ? Holder.from_token(fields[:token]) : nil)
      end

      def to_h
        super.merge(holder: holder&.to_h)
      end
    end
  end
end
