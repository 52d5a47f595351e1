# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      # activejob-uniqueness' job API, included into ActiveJob::Base:
      #
      #   class FooJob < ActiveJob::Base
      #     unique :until_executed, lock_ttl: 3.hours, on_conflict: :log
      #   end
      #
      # lock_key_arguments, lock_key and runtime_lock_key may be overridden in the job class.
      module JobPatch
        def self.included(base)
          base.class_attribute :lock_strategy_class, instance_writer: false
          base.class_attribute :lock_options, instance_writer: false
          base.extend(ClassMethods)
          base.prepend(Ownership::Payload, Strategies::Performing::PerformNow)
          BeforePerform.install(base)
          callbacks(base)
        end

        # The strategy's callbacks, as activejob-uniqueness registers them (custom strategies use them).
        def self.callbacks(base)
          %i[before_enqueue before_perform after_perform].each do |kind|
            base.public_send(kind) { |job| job.lock_strategy.public_send(kind) if job.lock_strategy_class }
          end
          %i[around_enqueue around_perform].each do |kind|
            base.public_send(kind) do |job, block|
              job.lock_strategy_class ? job.lock_strategy.public_send(kind, block) : block.call
            end
          end
        end

        # Class-level API.
        module ClassMethods
          # Turns uniqueness on: strategy (:until_executing, :until_executed, :until_expired,
          # :until_and_while_executing, :while_executing or a configured one) and its options
          # (lock_ttl:, on_conflict:, on_runtime_conflict:, runtime_lock_ttl:, on_redis_connection_error:).
          def unique(strategy, options = {})
            config = Uniqueness.config
            config.validate_on_conflict_action!(options[:on_conflict])
            config.validate_on_conflict_action!(options[:on_runtime_conflict])
            config.validate_on_redis_connection_error!(options[:on_redis_connection_error])

            self.lock_strategy_class = Strategies.lookup(strategy)
            self.lock_options = options
          end

          # Frees every lock of this class (no arguments) or those of these arguments.
          def unlock!(*arguments)
            Uniqueness.unlock!(job_class_name: name, arguments: arguments)
          end
        end

        def lock_strategy
          @lock_strategy ||= lock_strategy_class.new(job: self)
        end

        # The arguments the lock key digests (override to pick some).
        def lock_key_arguments
          arguments
        end

        def lock_key
          lock_key_generator.lock_key
        end

        def runtime_lock_key
          lock_key_generator.runtime_lock_key
        end

        def lock_key_generator
          @lock_key_generator ||= LockKey.new(job_class_name: self.class.name, arguments: lock_key_arguments)
        end
      end
    end
  end
end
