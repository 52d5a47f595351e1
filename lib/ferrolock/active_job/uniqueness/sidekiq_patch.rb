# frozen_string_literal: true

require "sidekiq/api"

module Ferrolock
  module ActiveJob
    # (The Sidekiq patch's part of the drop-in.)
    module Uniqueness
      # Frees an ActiveJob job's locks (by key, as activejob-uniqueness does) from its Sidekiq payload.
      def self.unlock_sidekiq_job!(job_data)
        return unless Ferrolock::Job.from_sidekiq(job_data).active_job?

        job = SidekiqPatch.job_of(job_data)
        return unless job.class.respond_to?(:lock_strategy_class) && job.class.lock_strategy_class

        begin
          job.send(:deserialize_arguments_if_needed)
        rescue ::ActiveJob::DeserializationError
          return # a record gone: its lock expires with lock_ttl
        end
        unlock!(job_class_name: job.class.name, arguments: job.arguments)
      end

      # Prepended to Sidekiq's API classes (see lib/active_job/uniqueness/sidekiq_patch.rb).
      module SidekiqPatch
        # Sidekiq::SortedEntry (scheduled, retry and dead jobs).
        module SortedEntry
          def delete
            Uniqueness.unlock_sidekiq_job!(item) if super
            item
          end

          private

          def remove_job
            super do |message|
              Uniqueness.unlock_sidekiq_job!(::Sidekiq.load_json(message))
              yield message
            end
          end
        end

        # Sidekiq::ScheduledSet
        module ScheduledSet
          def delete(score, job_id)
            entry = find_job(job_id)
            Uniqueness.unlock_sidekiq_job!(entry.item) if super
            entry
          end
        end

        # Sidekiq::JobRecord (a queued job)
        module JobRecord
          def delete
            Uniqueness.unlock_sidekiq_job!(item)
            super
          end
        end

        # Sidekiq::Queue and Sidekiq::JobSet: clearing deletes each job first.
        module Clear
          def clear
            each(&:delete)
            super
          end
        end

        # Sidekiq::JobSet
        module JobSet
          def delete_by_value(name, value)
            Uniqueness.unlock_sidekiq_job!(::Sidekiq.load_json(value)) if super
          end
        end

        # The job of a payload, or nil when its class is gone.
        def self.job_of(job_data)
          ::ActiveJob::Base.deserialize(job_data.fetch("args").first)
        rescue NameError
          nil
        end

        def self.install
          ::Sidekiq::SortedEntry.prepend(SortedEntry)
          ::Sidekiq::ScheduledSet.prepend(ScheduledSet)
          ::Sidekiq::Queue.prepend(Clear)
          ::Sidekiq::JobSet.prepend(Clear, JobSet)
          ::Sidekiq::JobRecord.prepend(JobRecord)
          handler = ->(job, _error) { Uniqueness.unlock_sidekiq_job!(job) }
          config = ::Sidekiq.respond_to?(:default_configuration) ? ::Sidekiq.default_configuration : ::Sidekiq
          config.death_handlers << handler
        end
      end

      SidekiqPatch.install
    end
  end
end
