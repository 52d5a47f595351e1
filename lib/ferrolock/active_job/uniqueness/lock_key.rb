# frozen_string_literal: true

require "active_support/json"

module Ferrolock
  module ActiveJob
    module Uniqueness
      # activejob-uniqueness' keys: `<lock_prefix>:<job class, underscored>:<digest of the arguments>`
      # (`no_arguments` when there are none), `:runtime` appended for :until_and_while_executing's
      # runtime lock. The digest is of the arguments as ActiveJob serializes them (GlobalIDs, not
      # as_json), as JSON in ArgumentDigest's canonical form (hash keys sorted), so `{a: 1, b: 2}` and
      # `{b: 2, a: 1}` are one key, as in DualLock and Sidekiq uniqueness. Byte for byte the old gem's
      # (and ferrolock's before this rule) unless a hash is out of key order; then legacy_lock_key is
      # that older key, which the strategies honour and free too (a rolling deploy).
      class LockKey
        FALLBACK_ARGUMENTS_STRING = "no_arguments"

        attr_reader :job_class_name, :arguments

        def initialize(job_class_name: nil, arguments: nil)
          if !(arguments.nil? || arguments.empty?) && (job_class_name.nil? || job_class_name.to_s.empty?)
            raise ArgumentError, "job_class_name is required if arguments given"
          end

          @job_class_name = job_class_name
          @arguments = arguments || []
        end

        def lock_key
          [config.lock_prefix, normalized_job_class_name, arguments_key_part].join(":")
        end

        def runtime_lock_key
          "#{lock_key}:runtime"
        end

        # The key the arguments had before ArgumentDigest's rule, when it differs; else nil.
        def legacy_lock_key
          return nil if arguments.empty? || ArgumentDigest.ordered?(serialized)

          [config.lock_prefix, normalized_job_class_name, config.digest_method.hexdigest(encode(serialized))].join(":")
        end

        # The legacy key standing for `key` (lock_key or runtime_lock_key), or nil.
        def legacy_of(key)
          legacy = legacy_lock_key
          return nil unless legacy

          { lock_key => legacy, runtime_lock_key => "#{legacy}:runtime" }[key]
        end

        # The SCAN pattern of a class's locks (all of them, or those of these arguments).
        def wildcard_key
          [config.lock_prefix, normalized_job_class_name, arguments.any? ? "#{arguments_key_part}*" : "*"]
            .compact.join(":")
        end

        private

        def config
          Uniqueness.config
        end

        def arguments_key_part
          arguments.any? ? config.digest_method.hexdigest(serialized_arguments) : FALLBACK_ARGUMENTS_STRING
        end

        def serialized_arguments
          encode(ArgumentDigest.canonical(serialized))
        end

        def serialized
          @serialized ||= ::ActiveJob::Arguments.serialize(arguments)
        end

        def encode(value)
          ActiveSupport::JSON.encode(value)
        end

        def normalized_job_class_name
          job_class_name&.to_s&.underscore
        end
      end
    end
  end
end
