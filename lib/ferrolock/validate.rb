# frozen_string_literal: true

module Ferrolock
  # The largest value of ANY seconds argument (TTLs, leases, waits, timeouts): 10 years. Far
  # beyond any real lease or wait, and far inside what Redis PX and Rust's Duration/Instant
  # arithmetic accept, so no value can overflow on the way.
  MAX_SECONDS = 315_360_000
  # The shortest TTL, lease or connect/read timeout: Redis counts expiries in milliseconds.
  # (Waits may be 0: one attempt.)
  MIN_TTL_SECONDS = 0.001
  # The longest name (lock name, DualLock key, namespace, queue, message id), in bytes.
  MAX_NAME_BYTES = 1024
  # The largest count (ConcurrentLimiter count, fair_tenant threshold, max_reschedules): exact
  # in Redis' Lua numbers (doubles) and in a 32-bit counter.
  MAX_COUNT = 1_000_000_000

  # Argument checks shared by the primitives: each error names the argument and, for a value
  # out of range, the bound.
  module Validate
    module_function

    # A lock/limiter name: a non-empty String or Symbol of at most MAX_NAME_BYTES of valid UTF-8,
    # without braces (they would break the Redis Cluster hash tag). NUL and newlines are fine:
    # Redis keys are binary-safe. Returns the name as a UTF-8 String.
    def name!(arg, value)
      unless value.is_a?(String) || value.is_a?(Symbol)
        raise TypeError, "#{arg} must be a String or Symbol, got #{show(value)}"
      end

      value = text!(arg, value.to_s)
      raise ArgumentError, "#{arg} must not contain '{' or '}' (got #{show(value)})" if value.match?(/[{}]/)

      value
    end

    # A non-empty String of at most MAX_NAME_BYTES bytes of valid UTF-8 (the native layer takes
    # UTF-8 only), returned as UTF-8.
    def text!(arg, value)
      raise TypeError, "#{arg} must be a String, got #{show(value)}" unless value.is_a?(String)
      raise ArgumentError, "#{arg} must not be empty" if value.empty?
      if value.bytesize > MAX_NAME_BYTES
        raise ArgumentError, "#{arg} must be at most #{MAX_NAME_BYTES} bytes, got #{value.bytesize} bytes"
      end

      utf8 = value.encoding == Encoding::UTF_8 ? value : value.encode(Encoding::UTF_8)
      raise EncodingError unless utf8.valid_encoding?

      utf8
    rescue EncodingError
      raise ArgumentError, "#{arg} must be valid UTF-8, got #{show(value)} (#{value.encoding})"
    end

    # Seconds (Integer, Float, Rational or ActiveSupport::Duration) as a Float: a TTL/lease of
    # MIN_TTL_SECONDS up to MAX_SECONDS, or with allow_zero: a wait of 0 up to MAX_SECONDS.
    def seconds!(arg, value, allow_zero: false)
      value = float!(arg, value)
      if allow_zero
        raise ArgumentError, "#{arg} must be zero or more, got #{value}" if value.negative?
      else
        raise ArgumentError, "#{arg} must be positive, got #{value}" unless value.positive?
        if value < MIN_TTL_SECONDS
          raise ArgumentError, "#{arg} must be at least #{MIN_TTL_SECONDS} seconds (1 ms), got #{value}"
        end
      end
      at_most!(arg, value)
    end

    # A number of seconds as a Float, not NaN (range checks are the caller's).
    def float!(arg, value)
      value = value.to_f if defined?(ActiveSupport::Duration) && value.is_a?(ActiveSupport::Duration)
      raise TypeError, "#{arg} must be a number of seconds, got #{show(value)}" unless value.is_a?(Numeric)

      float = value.to_f
      # Complex is Numeric too; its to_f raises RangeError unless the imaginary part is 0.
      raise ArgumentError, "#{arg} must be a number, got #{show(value)}" if float.nan?

      float
    rescue RangeError, NoMethodError
      raise TypeError, "#{arg} must be a real number of seconds, got #{show(value)}"
    end

    def at_most!(arg, seconds)
      return seconds if seconds <= MAX_SECONDS

      raise ArgumentError, "#{arg} must be at most #{MAX_SECONDS} seconds (10 years), got #{seconds}"
    end

    # An Integer from 1 to MAX_COUNT.
    def positive_integer!(arg, value)
      count!(arg, value, min: 1)
    end

    # An Integer from min (0 or 1) to MAX_COUNT.
    def count!(arg, value, min:)
      raise TypeError, "#{arg} must be an Integer, got #{show(value)}" unless value.is_a?(Integer)
      raise ArgumentError, "#{arg} must be #{min.zero? ? "zero or more" : "positive"}, got #{value}" if value < min
      raise ArgumentError, "#{arg} must be at most #{MAX_COUNT}, got #{show(value)}" if value > MAX_COUNT

      value
    end

    # A backoff proc's answer as a delay in seconds (0 up to MAX_SECONDS), or nil when unusable.
    def delay(value)
      seconds!(:delay, value, allow_zero: true)
    rescue ArgumentError, TypeError
      nil
    end

    # A file path (String or anything with #to_path), or nil.
    def path!(arg, value)
      return nil if value.nil?

      value = value.to_path if value.respond_to?(:to_path)
      raise TypeError, "#{arg} must be a String path or nil, got #{show(value)}" unless value.is_a?(String)
      raise ArgumentError, "#{arg} must not be empty" if value.empty?

      value
    end

    def boolean!(arg, value)
      raise TypeError, "#{arg} must be true or false, got #{show(value)}" unless [true, false].include?(value)

      value
    end

    # The client to use: the one given, or Ferrolock.client.
    def client!(value)
      return Ferrolock.client if value.nil?
      raise TypeError, "client must be a Ferrolock::Client, got #{value.class}" unless value.is_a?(Ferrolock::Client)

      value
    end

    # value.inspect cut short, so a 10 MB argument does not become a 10 MB message.
    def show(value)
      text = value.inspect
      text.length > 80 ? "#{text[0, 60]}…(#{text.length} characters)" : text
    end
  end
end
