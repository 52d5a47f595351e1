# frozen_string_literal: true

module Ferrolock
  # The one shape of ferrolock's option parsers (DualLockSettings, UniqueSettings, Shoryuken::Options,
  # ActiveJob's limits_concurrency and concurrency_rule): unknown keys are refused by known!, and each
  # value is checked inside value, so every error says whose option it is and which one.
  module OptionCheck
    module_function

    # nil when every key is known; else an ArgumentError naming the owner, the unknown keys (shown
    # with Validate.show: a key may be a BasicObject) and the known ones.
    def known!(keys, known, owner, kind: "option")
      unknown = keys.reject { |key| known.include?(key) }
      return nil if unknown.empty?

      raise ArgumentError, "#{owner}: unknown #{kind}#{"s" if unknown.size > 1} " \
                           "#{unknown.map { |key| Validate.show(key) }.join(", ")} (known: #{known.join(", ")})"
    end

    # The member of `allowed` (Symbols) that `value` names: a Symbol, or a String compared by name
    # (not converted with to_sym, which raises EncodingError on bytes that are not UTF-8); nil
    # for anything else.
    def symbol_in(value, allowed)
      case value
      when Symbol then value if allowed.include?(value)
      when String then allowed.find { |known| known.name == value }
      end
    end

    # The block's value. Its ArgumentError or TypeError is raised again with `prefix` (the owner and
    # the option) before its message, as raise_as (default: its own class).
    def value(prefix, raise_as: nil)
      yield
    rescue ArgumentError, TypeError => e
      raise raise_as || e.class, "#{prefix} #{e.message}"
    end
  end
end
