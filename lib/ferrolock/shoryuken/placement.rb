# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # Where the Lock sits in a worker's Shoryuken chain. After AutoDelete (inside it), AutoDelete
    # would delete the copy that the Lock leaves alone because the message runs elsewhere; if that
    # run then failed, SQS would have nothing left to redeliver, and the job would be lost. Such a
    # chain is refused at each message (which then stays on the queue), naming the right place.
    # Anywhere before AutoDelete works: the Lock goes by the worker's own outcome (PerformWatch).
    module Placement
      AUTO_DELETE = "Shoryuken::Middleware::Server::AutoDelete"

      module_function

      def check!(worker)
        klass = worker.class
        return unless auto_deleting?(klass)

        classes = chain_classes(klass) or return
        lock_at = classes.index(LockMiddleware)
        delete_at = classes.index(Object.const_get(AUTO_DELETE))
        return if lock_at.nil? || delete_at.nil? || lock_at < delete_at

        raise ArgumentError, "Ferrolock::Shoryuken::LockMiddleware sits after AutoDelete in #{klass}'s middleware " \
                             "chain, " \
                             "where AutoDelete would delete copies of a message still running elsewhere; put it " \
                             "before: chain.insert_before Shoryuken::Middleware::Server::AutoDelete, " \
                             "Ferrolock::Shoryuken::LockMiddleware"
      end

      def auto_deleting?(klass)
        klass.respond_to?(:auto_delete?) && klass.auto_delete? && Object.const_defined?(AUTO_DELETE)
      end

      # The classes of the worker's chain, in order (Shoryuken's Chain#entries), or nil.
      def chain_classes(klass)
        return nil unless klass.respond_to?(:server_middleware)

        chain = klass.server_middleware
        return unless chain.respond_to?(:entries)

        chain.entries.map do |entry|
          entry.respond_to?(:klass) ? entry.klass : entry
        end
      end
    end
  end
end
