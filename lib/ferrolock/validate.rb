# frozen_string_literal: true

module Ferrolock
  # Argument checks shared by the primitives' constructors: each error names the argument.
  module Validate
    module_function

    # A lock/limiter name: a non-empty String or Symbol without braces (they would break the
    # Redis Cluster hash tag).
    def name!(arg, value)
      unless value.is_a?(String) || value.is_a?(Symbol)
        raise TypeError,
              "#{arg} must be a String or Symbol, got #{value.inspect}"
      end

      value = value.to_s
      raise ArgumentError, "#{arg} must not be empty" if value.empty?
      raise ArgumentError, "#{arg} must not contain '{' or '}' (got #{value.inspect})" if value.match?(/[{}]/)

      value
    end

    # A positive number of seconds (Integer, Float, Rational or ActiveSupport::Duration).
    def seconds!(arg, value, allow_zero: false)
      value = float!(arg, value)

      in_range = allow_zero ? !value.negative? : value.positive?
      raise ArgumentError, "#{arg} must be #{allow_zero ? "zero or more" : "positive"}, got #{value}" unless in_range

      value
    end

    # Any finite number of seconds as a Float.
    def float!(arg, value)
      value = value.to_f if defined?(ActiveSupport::Duration) && value.is_a?(ActiveSupport::Duration)
      raise TypeError, "#{arg} must be a number of seconds, got #{value.inspect}" unless value.is_a?(Numeric)
      raise ArgumentError, "#{arg} must be a finite number, got #{value}" unless value.to_f.finite?

      value.to_f
    end

    def positive_integer!(arg, value)
      raise TypeError, "#{arg} must be an Integer, got #{value.inspect}" unless value.is_a?(Integer)
      raise ArgumentError, "#{arg} must be positive, got #{value}" unless value.positive?

      value
    end

    def boolean!(arg, value)
      raise TypeError, "#{arg} must be true or false, got #{value.inspect}" unless [true, false].include?(value)

      value
    end

    # The client to use: the one given, or Ferrolock.client.
    def client!(value)
      return Ferrolock.client if value.nil?
      raise TypeError, "client must be a Ferrolock::Client, got #{value.class}" unless value.is_a?(Ferrolock::Client)

      value
    end
  end
end
