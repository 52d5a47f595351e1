# frozen_string_literal: true

module Ferrolock
  class Configuration
    # The process's configuration and default client (Ferrolock.config, .configure, .client):
    # Ferrolock extends this module.
    module Current
      CONFIG_LOCK = Mutex.new
      CLIENT_LOCK = Mutex.new
      private_constant :CONFIG_LOCK, :CLIENT_LOCK

      def config
        CONFIG_LOCK.synchronize { @config ||= Configuration.new }
      end

      # Yields the configuration; the default client is rebuilt on next use. All or nothing: the
      # block sets a copy, applied only when the block returns, so a bad value (or any exception)
      # leaves every setting, and the client built from them, as they were.
      def configure
        live = config
        draft = live.dup
        yield draft
        draft.instance_variables.each { |ivar| live.instance_variable_set(ivar, draft.instance_variable_get(ivar)) }
        reset_client!
        History.apply(live.history)
        live
      end

      # The default client, built from the configuration on first use.
      def client
        CLIENT_LOCK.synchronize do
          # Every option (and the server, cluster or sentinels) comes from the configuration.
          @client ||= Client.new
        end
      end

      def reset_client!
        CLIENT_LOCK.synchronize { @client = nil }
        nil
      end

      # Forgets every setting (tests use it to re-read the environment).
      def reset_config!
        CONFIG_LOCK.synchronize { @config = nil }
        reset_client!
        History.apply(Configuration.default_history)
      end

      def logger
        config.logger
      end

      # Logs one line at level (:info, :warn, :error) on the logger, with asynchronous exceptions
      # deferred until it is written: Logger rescues what lands in its write (StandardError), so a
      # Thread#raise or Timeout arriving then would be lost; deferred, it is raised after the line.
      def log(level, message)
        Thread.handle_interrupt(Object => :never) { logger.public_send(level, message) }
      end

      # A primitive's min_replicas_acked: keyword, checked; nil means the configured default.
      def min_replicas_acked!(value)
        nil.equal?(value) ? config.min_replicas_acked : Configuration.min_replicas_acked!(value)
      end
    end
  end
end
