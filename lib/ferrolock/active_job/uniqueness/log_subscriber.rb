# frozen_string_literal: true

require "active_support/log_subscriber"

module Ferrolock
  module ActiveJob
    module Uniqueness
      # activejob-uniqueness' log lines, from its events (`<event>.active_job_uniqueness`), to
      # ActiveJob's logger: lock/unlock at debug, conflicts at info.
      class LogSubscriber < ActiveSupport::LogSubscriber
        {
          lock: ["Locked", :debug, true], runtime_lock: ["Locked runtime", :debug, true],
          unlock: ["Unlocked", :debug, false], runtime_unlock: ["Unlocked runtime", :debug, false],
          conflict: ["Not unique", :info, true], runtime_conflict: ["Not unique runtime", :info, true]
        }.each do |event_name, (what, level, with_args)|
          define_method(event_name) do |event|
            job = event.payload[:job]
            public_send(level) { line(what, job, event.payload[:resource], with_args) }
          end
        end

        def logger
          ::ActiveJob::Base.logger
        end

        private

        def line(what, job, resource, with_args)
          text = "#{what} #{job.class.name} (Job ID: #{job.job_id}) (Lock key: #{resource})"
          return text unless with_args && job.arguments.any? && log_arguments?(job)

          "#{text} with arguments: #{job.arguments.map { |arg| shown(arg).inspect }.join(", ")}"
        end

        def log_arguments?(job)
          !job.class.respond_to?(:log_arguments?) || job.class.log_arguments?
        end

        def shown(arg)
          case arg
          when Hash then arg.transform_values { |value| shown(value) }
          when Array then arg.map { |value| shown(value) }
          else global_id(arg)
          end
        end

        def global_id(arg)
          identified = Object.const_defined?("GlobalID::Identification", false) &&
                       arg.is_a?(::GlobalID::Identification)
          identified ? arg.to_global_id : arg
        rescue StandardError
          arg
        end
      end
    end
  end
end
