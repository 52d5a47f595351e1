# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # The middleware's options and their checks. The same keys are accepted globally
    # (Ferrolock::Shoryuken.configure), per chain (chain.add Ferrolock::Shoryuken::Lock, lock_ttl: 120)
    # and per worker (shoryuken_options ferrolock_lock: { lock_ttl: 120 }); the narrower wins.
    module Options
      DEFAULTS = {
        enabled: false,
        lock_ttl: 60,
        processed_ttl: 3600,
        on_redis_error: :raise,
        client: nil
      }.freeze
      KEYS = DEFAULTS.keys.freeze
      REDIS_ERROR_POLICIES = %i[raise run].freeze

      module_function

      # A copy of hash with symbol keys, each value checked; unknown keys raise ArgumentError.
      def validate(hash, source)
        raise TypeError, "#{source} must be a Hash, got #{hash.inspect}" unless hash.is_a?(Hash)

        hash.each_with_object({}) do |(key, value), out|
          key = key.to_sym if key.is_a?(String)
          unless KEYS.include?(key)
            raise ArgumentError, "#{source}: unknown option #{key.inspect} (known: #{KEYS.join(", ")})"
          end

          out[key] = check(key, value)
        end
      end

      def check(key, value)
        case key
        when :enabled then Validate.boolean!(:enabled, value)
        when :lock_ttl, :processed_ttl then Validate.seconds!(key, value)
        when :on_redis_error then redis_error_policy!(value)
        when :client then value.nil? ? nil : Validate.client!(value)
        else raise ArgumentError, "unknown option #{key.inspect}"
        end
      end

      def redis_error_policy!(value)
        policy = value.is_a?(String) ? value.to_sym : value
        return policy if REDIS_ERROR_POLICIES.include?(policy)

        raise ArgumentError, "on_redis_error must be :raise or :run, got #{value.inspect}"
      end

      # A worker's `shoryuken_options ferrolock_lock:` as options: true/false switch the lock
      # on or off; a Hash switches it on (unless it says enabled: false) with its own settings.
      def from_worker(value)
        case value
        when nil then {}
        when true, false then { enabled: value }
        when Hash then { enabled: true }.merge(validate(value, "shoryuken_options ferrolock_lock"))
        else raise TypeError, "shoryuken_options ferrolock_lock must be true, false or a Hash, got #{value.inspect}"
        end
      end
    end
  end
end
