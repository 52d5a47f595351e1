# frozen_string_literal: true

require_relative "../dual_lock_settings"
require_relative "dual_lock/options"
require_relative "dual_lock/run"

module Ferrolock
  module ActiveJob
    # `sidekiq_options dual_lock:` for any ActiveJob adapter: per key at most one job performs and
    # at most one waits (a Ferrolock::DualLock); a further duplicate is skipped, because the waiting
    # one starts after it arrived and so covers its trigger. A job that waited past wait_timeout is
    # enqueued again for later (backoff), never dropped.
    #
    #   class SyncJob < ApplicationJob
    #     dual_lock wait_timeout: 30            # key: class + SHA-256 of the serialized arguments
    #     def self.dual_lock_key(record) = "sync:#{record.id}"   # or a key of your own
    #   end
    #
    # Options as sidekiq_options dual_lock: (key:, lease:, wait_lease:, wait_timeout:) and backoff:
    # ->(dual_lock, job, error) { seconds }. The Railtie includes this into ActiveJob::Base; without
    # Rails, `include Ferrolock::ActiveJob::DualLock` into a job class (or ActiveJob::Base).
    module DualLock
      # Payload key counting a job's reschedules after waiting too long.
      COUNTER = "ferrolock_dual_lock_waits"

      def self.included(base)
        return if base.respond_to?(:ferrolock_dual_lock) # included higher up already

        base.extend(ClassMethods)
        base.prepend(Payload)
        base.around_perform { |job, block| Run.new(job).call(block) }
      end

      # Class-level API.
      module ClassMethods
        # Turns DualLock on for this class (validated now: a bad option raises ArgumentError here).
        def dual_lock(**options)
          @ferrolock_dual_lock = Options.new(self, options)
        end

        # The class's options (a subclass inherits its parent's), or nil.
        def ferrolock_dual_lock
          return @ferrolock_dual_lock if instance_variable_defined?(:@ferrolock_dual_lock)

          superclass.respond_to?(:ferrolock_dual_lock) ? superclass.ferrolock_dual_lock : nil
        end
      end

      # The reschedule counter in and out of the payload.
      module Payload
        attr_writer :ferrolock_dual_lock_waits

        def ferrolock_dual_lock_waits
          @ferrolock_dual_lock_waits || 0
        end

        def serialize
          waits = ferrolock_dual_lock_waits
          waits.positive? ? super.merge(COUNTER => waits) : super
        end

        def deserialize(job_data)
          super
          @ferrolock_dual_lock_waits = job_data.fetch(COUNTER, 0).to_i
        end
      end
    end
  end
end
