# frozen_string_literal: true

require_relative "redact"

module Ferrolock
  # Argument checks shared by the primitives: each error names the argument and, for a value
  # out of range, the bound. Types are checked with `case`/`===` (Module#===), never by calling
  # the value's own methods (is_a?, respond_to?, nil?, inspect): a BasicObject has none of them,
  # and a bad argument must end in a TypeError naming it, not a NoMethodError.
  module Validate
    # Kernel's methods, callable on any object (a BasicObject included).
    KERNEL_TO_S = Kernel.instance_method(:to_s)
    KERNEL_CLASS = Kernel.instance_method(:class)

    # Validate.name!, and not in a RESERVED_PREFIXES key space unless an InternalName.
    def self.own_name!(arg, value) = InternalName.check!(arg, value)

    module_function

    # A lock/limiter name: a non-empty String or Symbol of at most MAX_NAME_BYTES of valid UTF-8,
    # without braces (they would break the Redis Cluster hash tag). NUL and newlines are fine:
    # Redis keys are binary-safe. Returns the name as a UTF-8 String.
    def name!(arg, value)
      case value
      when String, Symbol then nil
      else raise TypeError, "#{arg} must be a String or Symbol, got #{show(value)}"
      end

      value = text!(arg, value.to_s)
      raise ArgumentError, "#{arg} must not contain '{' or '}' (got #{show(value)})" if value.match?(/[{}]/)

      value
    end

    # A part of a key given as an id: a String, Symbol or Integer (tenant ids often are), checked
    # as text! and returned as a UTF-8 String. Nothing else is turned into text: a to_s that
    # happens to work (a Proc's "#<Proc:0x…>") would silently name the wrong key.
    def id!(arg, value)
      case value
      when String then text!(arg, value)
      when Symbol, Integer then text!(arg, value.to_s)
      else raise TypeError, "#{arg} must be a String, Symbol or Integer, got #{show(value)}"
      end
    end

    # A non-empty String of at most MAX_NAME_BYTES bytes of valid UTF-8 (the native layer takes
    # UTF-8 only), returned as UTF-8.
    def text!(arg, value)
      raise TypeError, "#{arg} must be a String, got #{Redact.value(arg, value)}" unless string?(value)
      raise ArgumentError, "#{arg} must not be empty" if value.empty?
      if value.bytesize > MAX_NAME_BYTES
        raise ArgumentError, "#{arg} must be at most #{MAX_NAME_BYTES} bytes, got #{value.bytesize} bytes"
      end

      utf8!(arg, value)
    end

    # The String as valid UTF-8 (converted from another encoding), or ArgumentError naming arg.
    def utf8!(arg, value)
      utf8 = value.encoding == Encoding::UTF_8 ? value : value.encode(Encoding::UTF_8)
      raise EncodingError unless utf8.valid_encoding?

      utf8
    rescue EncodingError
      raise ArgumentError, "#{arg} must be valid UTF-8, got #{Redact.value(arg, value)} (#{value.encoding})"
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
      value = value.to_f if duration?(value)
      raise TypeError, "#{arg} must be a number of seconds, got #{show(value)}" unless numeric?(value)

      float = value.to_f
      # Complex is Numeric too; its to_f raises RangeError unless the imaginary part is 0.
      raise ArgumentError, "#{arg} must be a number, got #{show(value)}" if float.nan?

      float
    rescue RangeError, NoMethodError
      raise TypeError, "#{arg} must be a real number of seconds, got #{show(value)}"
    end

    # An ActiveSupport::Duration (when ActiveSupport is loaded). Not `defined?(ActiveSupport::Duration)`:
    # Ruby wraps that in a hidden rescue-everything ("defined guard") that swallows an asynchronous
    # exception (Thread#raise, Timeout) landing while it runs, and this runs on every call.
    def duration?(value)
      !numeric?(value) && Object.const_defined?(:ActiveSupport) &&
        ::ActiveSupport.const_defined?(:Duration, false) && ::ActiveSupport::Duration === value # rubocop:disable Style/CaseEquality -- works on a BasicObject
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
      raise TypeError, "#{arg} must be an Integer, got #{show(value)}" unless integer?(value)
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

    # A file path (String or anything with #to_path), or nil; as UTF-8 (the native layer takes
    # UTF-8 only).
    def path!(arg, value)
      return nil if nil.equal?(value)

      value = value.to_path if !string?(value) && responds_to?(value, :to_path)
      raise TypeError, "#{arg} must be a String path or nil, got #{show(value)}" unless string?(value)
      raise ArgumentError, "#{arg} must not be empty" if value.empty?

      utf8!(arg, value)
    end

    def boolean!(arg, value)
      raise TypeError, "#{arg} must be true or false, got #{show(value)}" unless [true, false].include?(value)

      value
    end

    # A middleware's options Hash (`chain.add Klass, client: c` passes it to new): a Hash whose
    # keys are all in `known` (OptionCheck.known!, naming `owner`). Returns it.
    def options!(value, known, owner = "options")
      case value
      when Hash then nil
      else raise TypeError, "options must be a Hash (#{known.map { |k| "#{k}:" }.uniq.join(", ")}), got #{show(value)}"
      end
      # (known.include? compares with the known keys' own ==: a key without methods is just unknown.)
      OptionCheck.known!(value.keys, known, owner)
      value
    end

    # A callable option (backoff: ->(…) { seconds }), or nil.
    def callable!(arg, value, example)
      return value if nil.equal?(value) || responds_to?(value, :call)

      raise TypeError, "#{arg} must respond to #call (#{example}), got #{class_of(value)}"
    end

    # The client to use: the one given, or Ferrolock.client.
    def client!(value)
      case value
      when nil then Ferrolock.client
      when Ferrolock::Client then value
      else raise TypeError, "client must be a Ferrolock::Client, got #{class_of(value)}"
      end
    end

    # value.class, also for a BasicObject (for messages: "got Integer").
    def class_of(value)
      KERNEL_CLASS.bind_call(value)
    end

    # value.respond_to?(name); false for an object without respond_to? (a BasicObject). A proxy
    # answering respond_to? through method_missing still answers for its target.
    def responds_to?(value, name)
      value.respond_to?(name)
    rescue NoMethodError
      false
    end

    # value.inspect cut short, so a 10 MB argument does not become a 10 MB message. An object
    # without inspect (a BasicObject) shows as #<Class:0x…>. Passwords are redacted first (a
    # URL's, a Hash's password:), so the cut never leaves part of one.
    def show(value)
      text = Redact.text(inspect_of(value))
      text.length > 80 ? "#{text[0, 60]}…(#{text.length} characters)" : text
    end

    def inspect_of(value)
      value.inspect
    rescue NoMethodError
      KERNEL_TO_S.bind_call(value)
    end

    # Type tests that call nothing on the value (Module#===, as `case` does).
    def string?(value)
      case value
      when String then true
      else false
      end
    end

    def numeric?(value)
      case value
      when Numeric then true
      else false
      end
    end

    def integer?(value)
      case value
      when Integer then true
      else false
      end
    end

    private_class_method :inspect_of, :string?, :numeric?, :integer?
    private_constant :KERNEL_TO_S, :KERNEL_CLASS
  end
end
