# frozen_string_literal: true

module Ferrolock
  class Admin
    # ferrolock's key layout read backwards, for one namespace: SCAN patterns for a name pattern,
    # and the (name, part) of a key found. The layout is the core's (ext/ferrolock-core's
    # admin/layout.rs, through Native::Admin); this only binds it to the namespace.
    class KeySpace
      # The longest name pattern taken: a name is at most MAX_NAME_BYTES, and every SCAN call sends
      # the pattern again (and Redis' glob matching slows with a pattern's length and stars).
      MAX_PATTERN_BYTES = 4 * MAX_NAME_BYTES

      def initialize(namespace)
        @namespace = namespace
      end

      # A SCAN MATCH pattern for keys whose name matches the glob `pattern` (Redis glob: * ? [..]).
      def match(pattern = "*", part = "*")
        Native::Admin.scan_pattern(@namespace, pattern, part)
      end

      # [name, part], or nil for a key outside the namespace.
      def parse(key)
        Native::Admin.parse_key(@namespace, key)
      end

      def key(name, part)
        Native::Admin.key(@namespace, name, part)
      end

      # `text` matched literally inside a glob.
      def self.escape(text)
        Native::Admin.escape_glob(text)
      end

      # A name pattern from the user: a Redis glob, no braces (they would leave the hash tag), as
      # UTF-8 (names are UTF-8; other bytes would fail the match? below, or the key's interpolation).
      def self.pattern!(value)
        value = "*" if nil.equal?(value)
        # `case`, not value.is_a?: a BasicObject has no is_a? (Validate's rule).
        case value
        when String then nil
        else raise TypeError, "pattern must be a String, got #{Validate.show(value)}"
        end
        if value.bytesize > MAX_PATTERN_BYTES
          raise ArgumentError, "pattern must be at most #{MAX_PATTERN_BYTES} bytes, got #{value.bytesize} bytes"
        end

        value = Validate.utf8!(:pattern, value)
        raise ArgumentError, "pattern must not contain '{' or '}' (got #{Validate.show(value)})" if value.match?(/[{}]/)

        value.empty? ? "*" : value
      end
    end
  end
end
