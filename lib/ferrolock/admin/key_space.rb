# frozen_string_literal: true

module Ferrolock
  class Admin
    # ferrolock's key layout, `<namespace>:{<name>}:<part>`, read backwards: SCAN patterns for a
    # name pattern, and the (name, part) of a key found. Names never contain braces, so the first
    # "{" after the namespace and the "}:" before the part delimit the name.
    class KeySpace
      GLOB_SPECIAL = /[*?\[\]\\]/

      def initialize(namespace)
        @namespace = namespace
        @prefix = "#{namespace}:{"
      end

      # A SCAN MATCH pattern for keys whose name matches the glob `pattern` (Redis glob: * ? [..]).
      def match(pattern = "*", part = "*")
        "#{self.class.escape(@namespace)}:{#{pattern}}:#{part}"
      end

      # [name, part], or nil for a key outside the namespace.
      def parse(key)
        return nil unless key.start_with?(@prefix)

        close = key.index("}:", @prefix.size) or return nil
        [key[@prefix.size...close], key[(close + 2)..]]
      end

      def key(name, part)
        "#{@prefix}#{name}}:#{part}"
      end

      # `text` matched literally inside a glob.
      def self.escape(text)
        text.gsub(GLOB_SPECIAL) { |char| "\\#{char}" }
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
        value = Validate.utf8!(:pattern, value)
        raise ArgumentError, "pattern must not contain '{' or '}' (got #{Validate.show(value)})" if value.match?(/[{}]/)

        value.empty? ? "*" : value
      end
    end
  end
end
