# frozen_string_literal: true

require "time"

module Ferrolock
  class Admin
    # Who holds a lock, slot, DualLock stage or Shoryuken marker. Every owner token carries its
    # holder (`<32 hex>~host~pid~thread~fiber~asked at ms[~job class~jid]`, written by the
    # acquisition with the token, gone with it; see ext/ferrolock-core/src/holder.rs);
    # Native::Admin.holder is the one decoder. `thread` is Sidekiq's `tid` of that thread (as in
    # its log lines), `fiber` the same for the fiber. `since` is Redis time (`since_clock`
    # :redis) for a DistMutex, from its fencing token; for the others it is when the holder
    # asked, by the holder's own clock (:holder): a waiter's wait is included. Nothing else in
    # Redis dates a start: a limiter slot's score is its lease deadline (moved on by each renewal,
    # inherited by a hand-off; the lease itself is not stored), and a DualLock stage or Shoryuken
    # marker is its token with a TTL that renewals reset.
    Holder = Struct.new(:host, :pid, :thread, :fiber, :job_class, :jid, :since, :since_clock,
                        keyword_init: true) do
      # The holder `token` names, or nil (no token, or a token made without holder metadata).
      def self.from_token(token, fencing_token: nil)
        return nil unless token.is_a?(String)

        host, pid, thread, fiber, asked_ms, job_class, jid = Native::Admin.holder(token)
        return nil if host.nil?

        since, clock = if fencing_token.is_a?(Integer) && fencing_token >= Holder::MIN_TIME_FENCE
                         [Time.at(Rational(fencing_token, 1_000_000)).utc, :redis]
                       else
                         [Time.at(Rational(asked_ms, 1000)).utc, :holder]
                       end
        new(host: host, pid: pid, thread: thread, fiber: fiber, job_class: job_class, jid: jid,
            since: since, since_clock: clock)
      end

      def to_h
        super.merge(since: since&.iso8601(3)).compact
      end
    end
    # Fencing tokens are Redis time in µs (max(last + 1, TIME)): below this, a counter.
    Holder::MIN_TIME_FENCE = 1_000_000_000_000_000
  end
end
