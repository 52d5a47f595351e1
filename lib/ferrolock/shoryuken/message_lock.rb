# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # One execution per message on an at-least-once queue, keyed on queue + message id. The
    # middleware (Ferrolock::Shoryuken::LockMiddleware) uses it; any consumer can:
    #
    #   lock = Ferrolock::Shoryuken::MessageLock.new(lease: 60)
    #   lock.process("orders", msg.message_id) { handle(msg) } # => :ran, :processed or :in_progress
    #
    # The first delivery takes an in-progress lease (renewed while the block runs, so a long
    # job never lets a copy in; a crashed one frees it after lease, once called lock_ttl). Success marks the message
    # processed for processed_ttl; an exception drops the lease and is re-raised, so the next
    # copy runs it.
    #
    # Redis failing once the block is over is logged and evented (:release_failed), never raised:
    # the block's own exception, or :ran, is what the caller gets. After success the mark is sent
    # again in the background until Redis answers (within lease), and meanwhile the lease,
    # no longer renewed, stays in Redis: a copy delivered before lease passes is skipped as
    # :in_progress (left on the queue), then as :processed once the mark lands. Only when Redis
    # stays unreachable for all of lease can a later copy run again.
    class MessageLock
      attr_reader :client, :lease, :processed_ttl
      alias lock_ttl lease

      def initialize(lease: Deprecation::UNSET, processed_ttl: 3600, client: nil, lock_ttl: Deprecation::UNSET)
        given, lease = Deprecation.rename("Ferrolock::Shoryuken::MessageLock.new", :lock_ttl, :lease, [lock_ttl, lease],
                                          60)
        @lease = Validate.seconds!(given, lease)
        @processed_ttl = Validate.seconds!(:processed_ttl, processed_ttl)
        @client = Validate.client!(client)
        @native = Backend.build(:MessageLock, @client, @lease, @processed_ttl)
      end

      # Runs the block unless this message ran or runs elsewhere. Returns :ran, :processed
      # (skipped: acknowledge this copy) or :in_progress (skipped: leave this copy).
      def process(queue, message_id)
        raise ArgumentError, "process needs a block" unless block_given?

        lease = nil
        ran = false
        begin
          # The lease is recorded the moment it is granted (see Interrupts).
          outcome = begin_lease(queue, message_id, keep: ->(got) { lease = got unless got.is_a?(Symbol) })
          return outcome unless lease

          yield
          ran = true
        ensure
          # Any failure (Thread#kill/raise too) means the work did not complete: abort. Deferring
          # interrupts means none can skip finish/abort.
          Interrupts.release { settle(lease, queue, message_id, ran) if lease }
        end
        :ran
      end

      # A lease to pass to #finish or #abort_message, or :processed / :in_progress. A block gets
      # the lease as it is granted, before any asynchronous exception can land (see Interrupts).
      def begin_message(queue, message_id, &on_lease)
        begin_lease(queue, message_id, keep: ->(got) { on_lease&.call(got) unless got.is_a?(Symbol) })
      end

      # After success: :marked, :lapsed (the lease had expired meanwhile, yet nobody else had
      # claimed the message: marked anyway) or :lost (another delivery holds or finished it).
      def finish(lease)
        @native.finish(lease)
      end

      # After a failure: drops the lease so the next copy runs at once. True when it was ours.
      def abort_message(lease)
        @native.abort_message(lease)
      end

      # "<namespace>:{msg:<queue>:<message_id>}:state"
      def state_key(queue, message_id)
        @native.state_key(Validate.name!(:queue, queue), message_id!(message_id))
      end

      def inspect
        "#<#{self.class.name} lease=#{lease} processed_ttl=#{processed_ttl}>"
      end

      private

      # finish after success, abort_message after a failure; a failing Redis is only reported.
      def settle(lease, queue, message_id, ran)
        ran ? finish(lease) : abort_message(lease)
      rescue Error => e
        ReleaseFailure.report(e, what: "MessageLock #{queue}/#{message_id}", finished: ran,
                                 primitive: :message_lock, queue: queue, message_id: message_id)
      end

      # An interrupt (Thread#raise/kill, Timeout) either lands before the lease is granted or
      # after `keep` recorded it, never in between (see Interrupts).
      def begin_lease(queue, message_id, keep:)
        queue = Validate.name!(:queue, queue)
        message_id = message_id!(message_id)
        give_back = ->(got) { @native.abort_message(got) unless got.is_a?(Symbol) }
        Interrupts.acquire(keep: keep, give_back: give_back) { @native.begin_message(queue, message_id) }
      end

      def message_id!(value)
        value = Validate.text!(:message_id, value)
        raise ArgumentError, "message_id must not contain '{' or '}' (got #{value.inspect})" if value.match?(/[{}]/)

        value
      end
    end
  end
end
