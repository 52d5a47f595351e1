# frozen_string_literal: true

module Ferrolock
  module FairTenant
    # A job class's `fair_tenant_queues`, checked once: each rule reroutes to `queue` when more
    # than `threshold` enqueues of one tenant happened within `per` seconds. Rules are listed
    # from loosest to strictest; the LAST broken rule wins.
    #
    #   fair_tenant_queues: [
    #     { queue: "default_throttled", threshold: 100, per: 1.day },
    #     { queue: "default_superslow", threshold:  40, per: 1.hour },
    #   ]
    #
    # Keys may be Symbols or Strings (a job that went through JSON has Strings); `per` is seconds
    # (Numeric or ActiveSupport::Duration) and defaults to one day, as in sidekiq-fair_tenant.
    class Rules
      DEFAULT_PER = 86_400
      KEYS = %w[queue threshold per].freeze
      NUMERIC = /\A\d+(\.\d+)?\z/
      ARG = "fair_tenant_queues"

      # Parsed rules per raw Array (by identity), so a class's options are checked once, not on
      # every push. Bounded, the most recent first: a job that went through JSON brings a new
      # Array each time. (Not an ObjectSpace::WeakMap: it was the suspect of GC crashes on Ruby 3.3.)
      CACHE_MAX = 64
      CACHE = {}.compare_by_identity
      CACHE_LOCK = Mutex.new
      private_constant :CACHE_MAX, :CACHE, :CACHE_LOCK

      attr_reader :queues, :thresholds, :pers, :native

      # nil when there are no rules (nil or an empty Array); else Rules, or ArgumentError /
      # TypeError naming the bad rule and key.
      # Types are tested with `case` (Module#===), never raw.is_a?: a BasicObject has none.
      def self.parse(raw)
        case raw
        when nil then return nil
        when Rules then return raw
        when Array then return nil if raw.empty?
        else raise TypeError, "#{ARG} must be an Array of Hashes, got #{Validate.class_of(raw)}"
        end

        cached = CACHE_LOCK.synchronize { CACHE[raw] }
        return cached if cached

        remember(raw, new(raw))
      end

      def self.remember(raw, rules)
        CACHE_LOCK.synchronize do
          CACHE.shift if CACHE.size >= CACHE_MAX
          CACHE[raw] = rules
        end
      end
      private_class_method :remember

      # parse, with the job class's name in front of an error's message (a push does not say
      # which class's options were bad otherwise).
      def self.parse_for(class_name, raw)
        parse(raw)
      rescue ArgumentError, TypeError => e
        raise e.exception("#{class_name}: #{e.message}")
      end

      def initialize(raw)
        case raw
        when Array then nil
        else raise TypeError, "#{ARG} must be an Array of Hashes, got #{Validate.class_of(raw)}"
        end

        parsed = raw.each_with_index.map { |rule, index| parse_rule(rule, "#{ARG}[#{index}]") }
        @queues = parsed.map { |rule| rule[:queue] }.freeze
        @thresholds = parsed.map { |rule| rule[:threshold] }.freeze
        @pers = parsed.map { |rule| rule[:per] }.freeze
        @native = Native::FairTenantRules.new(@thresholds, @pers)
        freeze
      end

      def size
        @queues.size
      end

      # The queue of rule number `index` (1-based, as the script returns it).
      def queue_at(index)
        @queues.fetch(index - 1)
      end

      def inspect
        rules = size.times.map { |i| "#{@queues[i]}: >#{@thresholds[i]}/#{@pers[i]}s" }
        "#<#{self.class.name} #{rules.join(", ")}>"
      end

      private

      def parse_rule(rule, arg)
        case rule
        when Hash then nil
        else raise TypeError, "#{arg} must be a Hash with queue:, threshold: and per:, got #{Validate.show(rule)}"
        end

        rule = rule.transform_keys(&:to_s)
        unknown = rule.keys - KEYS
        unless unknown.empty?
          raise ArgumentError, "#{arg} has unknown key#{"s" if unknown.size > 1} " \
                               "#{unknown.map { |key| key.inspect[1..-2] }.join(", ")}"
        end

        { queue: queue!("#{arg}.queue", rule["queue"]),
          threshold: Validate.positive_integer!("#{arg}.threshold", rule["threshold"]),
          per: Validate.seconds!("#{arg}.per", per(rule.fetch("per", DEFAULT_PER))) }
      end

      # A Duration in a job that went through Sidekiq's JSON comes back as a String of seconds
      # ("3600"): take such numeric Strings, nothing else.
      def per(value)
        case value
        when String then numeric_text?(value) ? Float(value) : value
        else value
        end
      end

      # (match? raises on invalid UTF-8 or an ASCII-incompatible encoding: such a per is no number.)
      def numeric_text?(value)
        value.encoding.ascii_compatible? && value.valid_encoding? && value.match?(NUMERIC)
      end

      def queue!(arg, value)
        case value
        when nil then raise ArgumentError, "#{arg} is missing"
        when String, Symbol then nil
        else raise TypeError, "#{arg} must be a String or Symbol, got #{Validate.show(value)}"
        end
        raise ArgumentError, "#{arg} must not be empty" if value.to_s.empty?

        value.to_s.freeze
      end
    end
  end
end
