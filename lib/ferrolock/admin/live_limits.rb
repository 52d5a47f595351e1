# frozen_string_literal: true

module Ferrolock
  class Admin
    # Admin's live limits: a limit changed, or paused, for a ConcurrentLimiter, a limits_concurrency
    # key or a Shoryuken queue's lock (LimitOverride writes and reads them).
    module LiveLimits
      # A limit changed live (LimitOverride), in every process from its next attempt, until
      # #clear_override; holders are never evicted. `kind:` :concurrent_limiter (name: the limiter's)
      # or :limits_concurrency (name: the ActiveJob key "<group>/<key>", as #concurrency lists it); a
      # Shoryuken queue's lock (:shoryuken_lock, name: the queue) is only paused, resumed or cleared.
      # Each returns the LimitOverride::Override now in force (nil fields: none) and sends a
      # :limit_changed event.
      def set_limit(name, limit, kind: :concurrent_limiter)
        override(name, kind, :set_limit, limit)
      end

      # No slot is taken or handed on until #resume: waiters wait (or reschedule), a key's jobs are
      # blocked (whatever on_conflict says); nothing is dropped. `kind: :shoryuken_lock` (name: the
      # queue): its LockMiddleware runs no message, and hands each back to SQS for paused_delay.
      def pause(name, kind: :concurrent_limiter)
        override(name, kind, :pause)
      end

      def resume(name, kind: :concurrent_limiter)
        override(name, kind, :resume)
      end

      # Back to the limit the code passes (and resumed).
      def clear_override(name, kind: :concurrent_limiter)
        override(name, kind, :clear)
      end

      # The LimitOverride::Override in force for `name` (of `kind:`, as #set_limit takes them); nil when none.
      def limit_override(name, kind: :concurrent_limiter)
        LimitOverride.read(@client, LimitOverride.stored_name(Validate.name!(:name, name), kind))
      end

      # Shoryuken queues whose lock is paused (#pause(queue, kind: :shoryuken_lock)): their names, one SCAN
      # page; `pattern` matches the queue name.
      def paused_queues(queue_pattern = "*", cursor: "0", per_page: 25)
        prefix = Reading.prefix(:shoryuken_marker)
        page("#{prefix}#{KeySpace.pattern!(queue_pattern)}", cursor, per_page, [LimitOverride::PART]) do |name, _|
          queue = name.delete_prefix(prefix)
          QueuePaused.new(kind: :shoryuken_lock, name: queue) if limit_override(queue, kind: :shoryuken_lock)&.paused
        end
      end

      private

      def override(name, kind, action, limit = nil)
        LimitOverride.write(@client, Validate.name!(:name, name), action, limit, kind: kind)
      end
    end
  end
end
