# frozen_string_literal: true

require_relative "strategies/performing"
require_relative "strategies/base"
require_relative "strategies/locking_on_enqueue"
require_relative "strategies/running"
require_relative "strategies/until_executing"
require_relative "strategies/until_executed"
require_relative "strategies/until_expired"
require_relative "strategies/while_executing"
require_relative "strategies/until_and_while_executing"

module Ferrolock
  module ActiveJob
    module Uniqueness
      # The built-in strategies, and custom ones from config.lock_strategies (name => class).
      module Strategies
        def self.lookup(strategy)
          const = strategy.to_s.camelize
          (const_defined?(const, false) && const != "Base" && const_get(const, false)) ||
            Uniqueness.config.lock_strategies[strategy] ||
            raise(StrategyNotFound, "Strategy '#{strategy}' is not found. Is it declared in the configuration?")
        end
      end
    end
  end
end
