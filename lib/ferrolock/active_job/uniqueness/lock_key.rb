# frozen_string_literal: true

require "active_support/json"

module Ferrolock
  module ActiveJob
    module Uniqueness
      # activejob-uniqueness' keys, byte for byte, so both gems take the same key during a rolling
      # deploy: `<lock_prefix>:<job class, underscored>:<digest of the arguments>` (`no_arguments` when
      # there are none), `:runtime` appended for :until_and_while_executing's runtime lock. The digest
      # is of the arguments as ActiveJob serializes them (GlobalIDs, not as_json), as JSON.
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
          ActiveSupport::JSON.encode(::ActiveJob::Arguments.serialize(arguments))
        end

        def normalized_job_class_name
          job_class_name&.to_s&.underscore
        end
      end
    end
  end
end
