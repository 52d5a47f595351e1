# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # What Ferrolock::Shoryuken.configure yields: process-wide defaults of the middleware.
    # Each setter checks its value at once, so a typo fails at boot, not at the first message.
    class Configuration
      Options::KEYS.each do |key|
        define_method(key) { @values[key] }
        define_method(:"#{key}=") { |value| @values[key] = Options.check(key, value) }
      end

      # Deprecated names of the accessors (see Options::RENAMED).
      Options::RENAMED.each do |old, new|
        define_method(old) { @values[new] }
        define_method(:"#{old}=") do |value|
          Deprecation.warn_once("Ferrolock::Shoryuken.configure", old, new)
          @values[new] = Options.check(new, value, given: old)
        end
      end

      def initialize(values = Options::DEFAULTS)
        @values = Options::DEFAULTS.merge(values)
      end

      def to_h
        @values.dup
      end
    end
  end
end
