# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # `limits_concurrency` is Solid Queue's name too (ActiveJob::ConcurrencyControls, which Solid
    # Queue's engine includes into ActiveJob::Base after the Railtie's Concurrency). Which one a
    # class gets must not depend on the order the two were included: where Solid Queue's is in the
    # class, `limits_concurrency` is Solid Queue's (its semaphore in the database, enforced by the
    # solid_queue adapter alone); `ferrolock_limits_concurrency` is ferrolock's everywhere.
    module SolidQueueMacro
      # The one `limits_concurrency` of ferrolock's modules; Solid Queue's, extended later, answers before it.
      module ClassMethods
        def limits_concurrency(**options)
          return super if SolidQueueMacro.solid_queue?(self)

          ferrolock_limits_concurrency(**options)
        end
      end

      WARNED = {} # rubocop:disable Style/MutableConstant -- the classes warned about, once each
      WARNED_LOCK = Mutex.new
      private_constant :WARNED, :WARNED_LOCK

      module_function

      # Whether Solid Queue's ActiveJob::ConcurrencyControls is in `klass`.
      def solid_queue?(klass)
        return false unless Object.const_defined?("ActiveJob::ConcurrencyControls", false)

        klass <= ::ActiveJob::ConcurrencyControls || false
      end

      # A job limited by Solid Queue's macro (no ferrolock `policy`), enqueued to another adapter, is
      # not limited at all: said once per class (not for the test adapter's jobs: they run nowhere).
      def check_enqueue(job, policy)
        klass = job.class
        return if policy || !solid_queue?(klass) || !klass.concurrency_key
        return if %w[solid_queue test].include?(klass.queue_adapter_name.to_s)

        first = WARNED_LOCK.synchronize { WARNED[klass.name] ? false : (WARNED[klass.name] = true) }
        return unless first

        Ferrolock.log(:warn, "ferrolock: #{klass.name} uses Solid Queue's limits_concurrency, which only Solid " \
                             "Queue's adapter enforces; on #{klass.queue_adapter_name} its jobs are not limited " \
                             "(ferrolock_limits_concurrency limits them on any adapter)")
      end
    end
  end
end
