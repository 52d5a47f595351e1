# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # The middleware's options and their checks. The same keys are accepted globally
    # (Ferrolock::Shoryuken.configure), per chain (chain.add Ferrolock::Shoryuken::LockMiddleware, lease: 120)
    # and per worker (shoryuken_options ferrolock_lock: { lease: 120 }); the narrower wins.
    # lock_ttl is lease's deprecated name.
    module Options
      DEFAULTS = {
        enabled: false,
        lease: 60,
        processed_ttl: 3600,
        on_redis_error: :raise,
        client: nil
      }.freeze
      KEYS = DEFAULTS.keys.freeze
      REDIS_ERROR_POLICIES = %i[raise run].freeze
      # Deprecated name => its new name.
      RENAMED = { lock_ttl: :lease }.freeze

      module_function

      # A copy of hash with symbol keys, each value checked; unknown keys raise ArgumentError.
      # Values are tested with `case`/`===` and shown with Validate.show, never with their own
      # methods (is_a?, nil?, inspect): a BasicObject has none (Validate's rule).
      def validate(hash, source)
        case hash
        when Hash then nil
        else raise TypeError, "#{source} must be a Hash, got #{Validate.show(hash)}"
        end

        hash.each_with_object({}) do |(key, value), out|
          given = option_name(key)
          key = renamed(given, hash, source)
          unless KEYS.include?(key)
            raise ArgumentError, "#{source}: unknown option #{Validate.show(key)} (known: #{KEYS.join(", ")})"
          end

          out[key] = check(key, value, given: given)
        end
      end

      # given: the name the caller wrote (a deprecated one), for errors.
      def check(key, value, given: key)
        case key
        when :enabled then Validate.boolean!(:enabled, value)
        when :lease, :processed_ttl then Validate.seconds!(given, value)
        when :on_redis_error then redis_error_policy!(value)
        when :client then nil.equal?(value) ? nil : Validate.client!(value)
        else raise ArgumentError, "unknown option #{key.inspect}"
        end
      end

      # The new name of a deprecated key (warning once), any other key as it is.
      def renamed(key, hash, source)
        new = RENAMED[key]
        return key unless new

        if hash.key?(new) || hash.key?(new.name)
          raise ArgumentError, "#{source}: give #{new}: or its deprecated name #{key}:, not both"
        end

        Deprecation.warn_once(source, key, new)
        new
      end

      # An option key as a Symbol: a String of valid UTF-8 is converted (to_sym raises on other
      # bytes); anything else is compared as it is (and is then an unknown option).
      def option_name(key)
        case key
        when String then key.valid_encoding? ? key.to_sym : key
        else key
        end
      end

      # :raise or :run, given as a Symbol or String (compared by name: a String's to_sym raises
      # on bytes that are not UTF-8).
      def redis_error_policy!(value)
        policy = case value
                 when Symbol then value
                 when String then REDIS_ERROR_POLICIES.find { |known| known.name == value }
                 end
        return policy if REDIS_ERROR_POLICIES.include?(policy)

        raise ArgumentError, "on_redis_error must be :raise or :run, got #{Validate.show(value)}"
      end

      # A worker's `shoryuken_options ferrolock_lock:` as options: true/false switch the lock
      # on or off; a Hash switches it on (unless it says enabled: false) with its own settings.
      def from_worker(value)
        case value
        when nil then {}
        when true, false then { enabled: value }
        when Hash then { enabled: true }.merge(validate(value, "shoryuken_options ferrolock_lock"))
        else
          raise TypeError, "shoryuken_options ferrolock_lock must be true, false or a Hash, got #{Validate.show(value)}"
        end
      end
    end
  end
end
