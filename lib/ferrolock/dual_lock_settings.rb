# frozen_string_literal: true

module Ferrolock
  # A job class's DualLock options (`sidekiq_options dual_lock: …`, or ActiveJob's `dual_lock …`
  # macro), validated, and the lock key it gives a job.
  #
  #   dual_lock: true                                   # key: class + SHA-256 of the arguments
  #   dual_lock: { key: "reindex", lease: 60, wait_lease: 60, wait_timeout: 30 }   # one fixed key
  #   def self.dual_lock_key(id, *) = "item:#{id}"     # a key from the arguments (class method)
  #
  # A key computed from the arguments is a class method, not a `key:` proc: Sidekiq copies
  # sidekiq_options into every job payload, where a proc would end up as the string "#<Proc…>".
  #
  # Every error names the job class, so a typo fails the first job loudly instead of silently
  # running it without a lock. Deprecated names (warned once): wait_ttl, exec_ttl, max_wait.
  class DualLockSettings
    OPTION_KEYS = %i[key lease wait_lease wait_timeout].freeze
    # Deprecated name => its new name (see Ferrolock::Deprecation).
    RENAMED = { exec_ttl: :lease, wait_ttl: :wait_lease, max_wait: :wait_timeout }.freeze
    KEY_METHOD = :dual_lock_key
    DEFAULTS = { lease: 60, wait_lease: 60, wait_timeout: 30 }.freeze

    attr_reader :job_class, :lease, :wait_lease, :wait_timeout

    def initialize(job_class, raw)
      @job_class = job_class
      options = normalize(raw)
      @key = key_option(options[:key])
      @key_method = key_method
      @lease = checked { Validate.seconds!(given_name(:lease), options[:lease]) }
      @wait_lease = checked { Validate.seconds!(given_name(:wait_lease), options[:wait_lease]) }
      @wait_timeout = checked do
        Validate.seconds!(given_name(:wait_timeout), options[:wait_timeout], allow_zero: true)
      end
    end

    # The lock key for one job's arguments. Raises Ferrolock::Error (naming the class) when
    # the class's dual_lock_key raises or returns something unusable.
    def key_for(args)
      return @key if @key
      return default_key(args) unless @key_method

      value = call_key_method(args)
      usable_key(value) or
        raise Ferrolock::Error, "#{class_name}.#{KEY_METHOD} must return a non-empty String, Symbol or " \
                                "Integer of valid UTF-8 without '{' or '}', got #{Validate.show(value)}"
    end

    private

    # (`case`, nil.equal?, Validate.responds_to?/show: safe on a BasicObject, which has neither
    # is_a?, nil?, respond_to? nor inspect)
    def normalize(raw)
      case raw
      when true then DEFAULTS
      when Hash then DEFAULTS.merge(known_options(raw))
      else
        raise ArgumentError, "#{class_name}: #{option_label}: must be true or a Hash " \
                             "(#{OPTION_KEYS.map { |k| "#{k}:" }.join(", ")}), got #{Validate.show(raw)}"
      end
    end

    def known_options(raw)
      options = renamed(raw.transform_keys { |k| option_key(k) })
      OptionCheck.known!(options.keys, OPTION_KEYS, class_name, kind: "dual_lock option")
      options
    end

    # The options under their new names; an old name warns once per job class (and is remembered,
    # for errors to name what the class wrote).
    def renamed(options)
      @given_names = {}
      options.each_pair.with_object({}) do |(key, value), out|
        new = RENAMED[key] if Symbol === key # rubocop:disable Style/CaseEquality -- key may be a BasicObject
        next out[key] = value unless new

        owner = "#{class_name} #{option_label}"
        @given_names[new], out[new] = Deprecation.rename(owner, key, new,
                                                         [value, options.fetch(new, Deprecation::UNSET)], nil)
      end
    end

    def given_name(name)
      @given_names&.fetch(name, name) || name
    end

    # A String key as a Symbol (JSON turned them into Strings); any other key as it is.
    def option_key(key)
      case key
      when String then key.to_sym
      else key
      end
    rescue EncodingError
      key # not UTF-8: unknown anyway
    end

    # (nil.equal?, Validate.responds_to?: safe on a BasicObject, which has neither nil? nor respond_to?)
    def key_option(key)
      return nil if nil.equal?(key)

      usable = usable_key(key)
      return usable if usable

      if Validate.responds_to?(key, :call)
        raise ArgumentError, "#{class_name}: a dual_lock key: proc would be copied into every job payload " \
                             "(as \"#<Proc…>\"); define `def self.#{KEY_METHOD}(*args)` on the class instead"
      end

      raise ArgumentError, "#{class_name}: dual_lock key: must be a non-empty String without '{' or '}' " \
                           "(or define self.#{KEY_METHOD}(*args)), got #{Validate.show(key)}"
    end

    # True when the class computes its keys (def self.dual_lock_key); a fixed key: besides is ambiguous.
    def key_method
      return false unless Validate.responds_to?(@job_class, KEY_METHOD)
      return true if @key.nil?

      raise ArgumentError, "#{class_name}: give either dual_lock key: or self.#{KEY_METHOD}, not both"
    end

    def checked(&block)
      OptionCheck.value("#{class_name}: dual_lock", &block)
    end

    def call_key_method(args)
      @job_class.public_send(KEY_METHOD, *args)
    rescue ForeignError
      raise # an outer timeout keeps its class, or the Timeout.timeout that sent it would miss it
    rescue StandardError => e
      raise Ferrolock::Error, "#{class_name}.#{KEY_METHOD} raised #{e.class}: #{e.message}"
    end

    # The key as a UTF-8 String, or nil unless a non-empty String, Symbol or Integer of at most
    # MAX_NAME_BYTES of valid UTF-8 without braces.
    def usable_key(value)
      key = Validate.id!(:key, value)
      key.match?(/[{}]/) ? nil : key
    rescue ArgumentError, TypeError
      nil
    end

    # Job class + SHA-256 of the arguments as canonical JSON (ArgumentDigest: hash keys sorted), so
    # the same arguments always give the same key whatever order a hash was built in.
    def default_key(args)
      "#{class_name}:#{ArgumentDigest.sha256(args)}"
    end

    # How the class wrote its options, for messages.
    def option_label
      "dual_lock"
    end

    def class_name
      Validate.responds_to?(@job_class, :name) && @job_class.name ? @job_class.name : @job_class.to_s
    end
  end
end
