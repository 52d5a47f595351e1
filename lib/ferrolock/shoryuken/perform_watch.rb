# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # Whether the worker's own #perform returned, raised, or was not called while the rest of the
    # chain ran inside the Lock. The chain's outcome alone does not tell: a middleware inside the
    # Lock may fail after the job succeeded (AutoDelete's SQS delete raising), or swallow the job's
    # failure (ExponentialBackoffRetry placed inside the Lock). The processor calls perform on the
    # very worker object the middlewares get, so a hook on that object sees the job itself.
    class PerformWatch
      IVAR = :@ferrolock_perform_watch
      # Prepended to a watched worker's singleton class; the watch lives in the worker's ivar.
      module Hook
        def perform(*args, &block)
          watch = @ferrolock_perform_watch
          return super unless watch

          # Anything but a return (an exception, Thread#kill) leaves it :raised.
          watch.outcome = :raised
          result = super
          watch.outcome = :returned
          result
        end
        ruby2_keywords(:perform)
      end

      # nil: perform not called (yet); :returned or :raised: how its last call ended.
      attr_accessor :outcome

      # A watch on worker's perform, or nil when the worker cannot be watched (frozen, no perform,
      # an object without a singleton class).
      def self.attach(worker)
        return nil if worker.frozen? || !worker.respond_to?(:perform)

        watched = worker.singleton_class
        watched.prepend(Hook) unless watched.include?(Hook)
        watch = new
        worker.instance_variable_set(IVAR, watch)
        watch
      rescue TypeError, NoMethodError # an Integer, a BasicObject...: not watched, the chain decides
        nil
      end

      def self.detach(worker)
        worker.remove_instance_variable(IVAR) if worker.instance_variable_defined?(IVAR)
      rescue TypeError, NoMethodError, FrozenError
        nil
      end

      def returned?
        @outcome == :returned
      end

      def raised?
        @outcome == :raised
      end
    end
  end
end
