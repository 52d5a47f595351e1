# frozen_string_literal: true

require_relative "reading"
require_relative "released"

module Ferrolock
  class Admin
    # An operator's release: reads the current holder's token, then runs the primitive's own
    # token-checked release script with it (Native::Admin.force_release), so waiters are handed
    # the lock or woken exactly as by the holder's release. A holder that changed meanwhile is
    # left alone. The holder itself learns at its next renewal (LockLost / :lock_lost event).
    # A uniqueness digest's push-time lock is freed by its own jid-checked release: a duplicate
    # pushed from then on is enqueued (nothing waits on it, so nothing is handed on).
    # Each hold given up is a :released event with `forced: true`; a DistMutex's with :held, the
    # seconds its token held the lock by Redis' clock (from its fencing token, which is Redis time at
    # the grant). Nothing else in Redis dates a grant (Holder), so the other kinds' have no :held.
    class Release
      KINDS = %i[dist_mutex dual_lock concurrent_limiter unique_lock].freeze
      # What a uniqueness digest can hold under its own name (its run-time lock is `<digest>:run`).
      DIGEST_KINDS = %i[unique_lock].freeze
      # The lease a waiter is handed a DistMutex with when the holder's TTL is unknown (no
      # expiry); the waiter's own lease then renews it.
      DEFAULT_TTL = 30.0
      MIN_TTL = 1.0

      def initialize(client)
        @client = client
      end

      # Array of Released (empty: nothing of `kind` held by `token`, or by anyone, under `name`).
      def call(name, kind: nil, token: nil)
        kinds = nil.equal?(kind) ? KINDS : [self.class.kind!(kind)] # (a BasicObject has no nil?)
        # A digest's key is no DistMutex (its value is a jid), and only a digest is a uniqueness lock.
        kinds &= UniqueInfo.digest?(name) ? DIGEST_KINDS : KINDS - DIGEST_KINDS
        kinds.flat_map { |k| send(k, name, token) }
      end

      def self.kind!(value)
        kind = OptionCheck.symbol_in(value, KINDS)
        return kind if kind

        raise ArgumentError, "kind must be one of #{KINDS.map(&:inspect).join(", ")}, got #{Validate.show(value)}"
      end

      private

      # The next holder gets about the TTL the current one had: renewed holders sit between 2/3
      # and all of their lease, and a waiter's own lease renews it before that runs out.
      def dist_mutex(name, token)
        state = Reading.state(@client, :dist_mutex, name) || {}
        token ||= state[:token] or return []
        ttl = state[:ttl]&.positive? ? [state[:ttl], MIN_TTL].max : DEFAULT_TTL
        held = held_since(state[:fencing_token]) if token == state[:token]
        release(:dist_mutex, name, [token], ttl, held: held)
      end

      # EXEC's holder: the waiting duplicate (if any) is woken and runs.
      def dual_lock(name, token)
        token ||= Reading.state(@client, :dual_lock, name)&.dig(:exec, :token) or return []
        release(:dual_lock, name, [token], DEFAULT_TTL)
      end

      # Every live slot, or the one of `token`.
      def concurrent_limiter(name, token)
        live = (Reading.state(@client, :concurrent_limiter, name)&.fetch(:slots) || []).map { |slot| slot[:token] }
        tokens = token ? live & [token] : live
        release(:concurrent_limiter, name, tokens, DEFAULT_TTL, limit: [live.size, 1].max)
      end

      # The jid holding the digest's push-time lock, or the given one.
      def unique_lock(name, jid)
        jid ||= Reading.state(@client, :unique_lock, name)&.fetch(:jid) or return []
        release(:unique_lock, name, [jid], DEFAULT_TTL)
      end

      # options: limit: (a limiter's, 1 else), held: (seconds, when known).
      def release(kind, name, tokens, ttl, **options)
        limit = options.fetch(:limit, 1)
        tokens.select { |t| Native::Admin.force_release(@client.native, kind.to_s, name, t, ttl, limit) }
              .map { |t| released(kind, name, t, options[:held]) }
      end

      def released(kind, name, token, held)
        payload = { primitive: kind, name: name, forced: true }
        payload[:held] = held if held
        Ferrolock.instrument(:released, payload)
        Released.new(kind: kind, name: name, token: token)
      end

      # Seconds since a grant whose fencing token is `fence` (Redis time in µs), by Redis' clock; nil
      # for a counter's token.
      def held_since(fence)
        return nil unless fence.is_a?(Integer) && fence >= Holder::MIN_TIME_FENCE

        seconds, micros = @client.call("TIME")
        [(Integer(seconds) * 1_000_000) + Integer(micros) - fence, 0].max / 1_000_000.0
      end
    end
  end
end
