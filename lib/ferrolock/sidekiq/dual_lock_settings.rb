# frozen_string_literal: true

require "digest"
require "json"

module Ferrolock
  module Sidekiq
    # A job class's `sidekiq_options dual_lock: …`, validated, and the lock key it gives a job.
    #
    #   dual_lock: true                                   # key: class + SHA-256 of the arguments
    #   dual_lock: { key: ->(*args) { "item:#{args[0]}" }, wait_ttl: 60, exec_ttl: 60, max_wait: 30 }
    #
    # Every error names the job class, so a typo fails the first job loudly instead of silently
    # running it without a lock.
    class DualLockSettings
      OPTION_KEYS = %i[key wait_ttl exec_ttl max_wait].freeze
      DEFAULTS = { wait_ttl: 60, exec_ttl: 60, max_wait: 30 }.freeze

      attr_reader :job_class, :wait_ttl, :exec_ttl, :max_wait

      # nil when the class did not opt in.
      def self.for(job_class)
        raw = raw_option(job_class)
        return nil if raw.nil? || raw == false

        new(job_class, raw)
      end

      # The class's dual_lock option, from sidekiq_options (also on ActiveJob classes that include
      # Sidekiq::Worker::Options, as sidekiq/rails does).
      def self.raw_option(job_class)
        return nil unless job_class.respond_to?(:get_sidekiq_options)

        options = job_class.get_sidekiq_options
        options.fetch("dual_lock") { options[:dual_lock] }
      end

      def initialize(job_class, raw)
        @job_class = job_class
        options = normalize(raw)
        @key = key_option(options[:key])
        @wait_ttl = checked { Validate.seconds!(:wait_ttl, options[:wait_ttl]) }
        @exec_ttl = checked { Validate.seconds!(:exec_ttl, options[:exec_ttl]) }
        @max_wait = checked { Validate.seconds!(:max_wait, options[:max_wait], allow_zero: true) }
      end

      # The lock key for one job's arguments. Raises Ferrolock::Error (naming the class) when
      # the key proc raises or returns something unusable.
      def key_for(args)
        return default_key(args) if @key.nil?

        value = @key.respond_to?(:call) ? call_key_proc(args) : @key
        return value.to_s if valid_key?(value)

        raise Ferrolock::Error, "#{class_name}: the dual_lock key must give a non-empty String, Symbol or " \
                                "Integer without '{' or '}', got #{value.inspect}"
      end

      private

      def normalize(raw)
        return DEFAULTS if raw == true
        return DEFAULTS.merge(known_options(raw)) if raw.is_a?(Hash)

        raise ArgumentError, "#{class_name}: sidekiq_options dual_lock: must be true or a Hash " \
                             "(#{OPTION_KEYS.map { |k| "#{k}:" }.join(", ")}), got #{raw.inspect}"
      end

      def known_options(raw)
        options = raw.transform_keys { |k| k.respond_to?(:to_sym) ? k.to_sym : k }
        unknown = options.keys - OPTION_KEYS
        return options if unknown.empty?

        raise ArgumentError, "#{class_name}: unknown dual_lock option#{"s" if unknown.size > 1} " \
                             "#{unknown.map(&:inspect).join(", ")} (known: #{OPTION_KEYS.join(", ")})"
      end

      def key_option(key)
        return key if key.nil? || key.respond_to?(:call)
        return key.to_s if valid_key?(key)

        raise ArgumentError, "#{class_name}: dual_lock key: must be a proc (->(*args) { … }) or a " \
                             "non-empty String without '{' or '}', got #{key.inspect}"
      end

      def checked
        yield
      rescue ArgumentError, TypeError => e
        raise e.class, "#{class_name}: dual_lock #{e.message}"
      end

      def call_key_proc(args)
        @key.call(*args)
      rescue StandardError => e
        raise Ferrolock::Error, "#{class_name}: the dual_lock key proc raised #{e.class}: #{e.message}"
      end

      def valid_key?(value)
        (value.is_a?(String) || value.is_a?(Symbol) || value.is_a?(Integer)) &&
          !value.to_s.empty? && !value.to_s.match?(/[{}]/)
      end

      # Job class + SHA-256 of the arguments as canonical JSON (object keys sorted), so the same
      # arguments always give the same key whatever order a hash was built in.
      def default_key(args)
        "#{class_name}:#{Digest::SHA256.hexdigest(JSON.generate(canonical(args)))}"
      end

      def canonical(value)
        case value
        when Hash then value.map { |k, v| [k.to_s, canonical(v)] }.sort_by(&:first).to_h
        when Array then value.map { |v| canonical(v) }
        else value
        end
      end

      def class_name
        @job_class.respond_to?(:name) && @job_class.name ? @job_class.name : @job_class.to_s
      end
    end
  end
end
