# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # One class's limits_concurrency options, checked when the class is loaded (each error names
    # the option), and what they give for one job: its key and its limit.
    class ConcurrencyPolicy
      ON_CONFLICT = %i[block discard].freeze
      ON_MAX_BLOCKED = %i[raise discard].freeze
      # Solid Queue's default_concurrency_control_period.
      DEFAULT_DURATION = 180

      attr_reader :duration, :on_conflict, :max_blocked, :on_max_blocked

      def initialize(key:, to: 1, group: nil, duration: DEFAULT_DURATION, on_conflict: :block, # rubocop:disable Metrics/ParameterLists -- Solid Queue's options, by name
                     max_blocked: nil, on_max_blocked: :raise)
        @key = part!(:key, key)
        @group = group.nil? ? nil : part!(:group, group)
        @to = to.is_a?(Proc) ? to : limit!(to)
        @duration = option(:duration) { Validate.seconds!(:duration, duration) }
        @on_conflict = choice!(:on_conflict, on_conflict, ON_CONFLICT)
        unless max_blocked.nil?
          @max_blocked = option(:max_blocked) do
            Validate.positive_integer!(:max_blocked, max_blocked)
          end
        end
        @on_max_blocked = choice!(:on_max_blocked, on_max_blocked, ON_MAX_BLOCKED)
      end

      # "<group>/<key>" for this job (group: the class name unless given); a record (anything with a
      # GlobalID) stands for its GlobalID.
      def key_for(job)
        group = @group ? text(:group, evaluate(@group, job)) : job.class.name
        Validate.name!(:key, "#{group}/#{text(:key, evaluate(@key, job))}")
      end

      # The limit for this job's key (a proc `to:` is called with the job's arguments).
      def limit_for(job)
        return @to unless @to.is_a?(Proc)

        limit = job.instance_exec(*arguments(job), &@to)
        limit!(limit)
      end

      private

      # Validate's TypeError or ArgumentError, as an ArgumentError that says which option it was.
      def option(name, &block)
        OptionCheck.value("limits_concurrency #{name}:", raise_as: ArgumentError, &block)
      end

      def limit!(value)
        option(:to) { Validate.positive_integer!(:to, value) }
      end

      def part!(name, value)
        case value
        when Proc then value
        when String, Symbol
          raise ArgumentError, "limits_concurrency #{name}: must not be empty" if value.empty?

          value.to_s
        else
          raise ArgumentError, "limits_concurrency #{name}: must be a String, Symbol or a Proc of the job's " \
                               "arguments, got #{Validate.show(value)}"
        end
      end

      def choice!(name, value, allowed)
        return value if allowed.include?(value)

        raise ArgumentError, "limits_concurrency #{name}: must be #{allowed.map(&:inspect).join(" or ")}, " \
                             "got #{Validate.show(value)}"
      end

      def evaluate(part, job)
        part.is_a?(Proc) ? job.instance_exec(*arguments(job), &part) : part
      end

      # (Kernel's, so any object answers, a BasicObject too.)
      RESPOND_TO = Kernel.instance_method(:respond_to?)
      private_constant :RESPOND_TO

      def text(name, value)
        case value
        when String, Symbol, Integer then return value.to_s
        end
        return value.to_global_id.to_s if RESPOND_TO.bind_call(value, :to_global_id)

        raise ArgumentError, "limits_concurrency #{name} gave #{Validate.show(value)}: expected a String, Symbol, " \
                             "Integer or a record with a GlobalID"
      end

      # A job read back from its queue holds its arguments serialized until perform.
      def arguments(job)
        job.send(:deserialize_arguments_if_needed)
        job.arguments
      end
    end
  end
end
