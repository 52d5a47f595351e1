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
        client: nil,
        idempotency_key: nil,
        paused_delay: 10
      }.freeze
      KEYS = DEFAULTS.keys.freeze
      REDIS_ERROR_POLICIES = %i[raise run].freeze
      # SQS's longest visibility timeout (12 hours), in seconds.
      MAX_VISIBILITY = 43_200
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
          OptionCheck.known!([key], KEYS, source)

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
        when :idempotency_key then idempotency_key!(value)
        else later_check(key, value)
        end
      end

      # The options added since the first ones.
      def later_check(key, value)
        raise ArgumentError, "unknown option #{key.inspect}" unless key == :paused_delay

        paused_delay!(value)
      end

      # Whole seconds a message of a paused queue stays invisible before SQS delivers it again: 1 to 12 h.
      def paused_delay!(value)
        case value
        when Integer then return value if value.between?(1, MAX_VISIBILITY)
        else raise TypeError, "paused_delay must be an Integer (seconds), got #{Validate.show(value)}"
        end

        raise ArgumentError, "paused_delay must be 1 to #{MAX_VISIBILITY} seconds (SQS's visibility timeouts), " \
                             "got #{value}"
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
        policy = OptionCheck.symbol_in(value, REDIS_ERROR_POLICIES)
        return policy if policy

        raise ArgumentError, "on_redis_error must be :raise or :run, got #{Validate.show(value)}"
      end

      # What keys the lock instead of the SQS message id (two messages with one key run once: a
      # producer's retry): nil (the message id), a Proc or Method called with (sqs_msg, body)
      # that returns a String (nil: the message id), or a message attribute's name (a String).
      def idempotency_key!(value)
        case value
        when nil then nil
        when Proc, Method
          return value if key_callable?(value)

          raise ArgumentError, "idempotency_key: a #{Validate.class_of(value)} taking #{value.arity} " \
                               "argument(s) cannot be called with (sqs_msg, body)"
        when String then attribute_name!(value)
        else
          raise TypeError, "idempotency_key must be a Proc called with (sqs_msg, body) or a message attribute's " \
                           "name (a String), got #{Validate.show(value)}"
        end
      end

      # A lambda or Method must take two arguments; a plain proc takes any number.
      def key_callable?(callable)
        return true if callable.is_a?(Proc) && !callable.lambda?

        arity = callable.arity
        arity == 2 || (arity.negative? && -arity - 1 <= 2)
      end

      # SQS message attribute names: 1 to 256 of A-Z a-z 0-9 _ - . (AWS's rule).
      def attribute_name!(value)
        return value.dup.freeze if value.valid_encoding? && value.match?(/\A[A-Za-z0-9_.-]{1,256}\z/)

        raise ArgumentError, "idempotency_key: #{Validate.show(value)} is not an SQS message attribute name " \
                             "(1 to 256 of A-Z a-z 0-9 _ - .)"
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
