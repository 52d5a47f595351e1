# frozen_string_literal: true

module Ferrolock
  module FairTenant
    # What the middleware needs to know about one job payload: its class (the wrapped class for
    # ActiveJob), its arguments, rules, tenant and identity.
    class Job
      attr_reader :payload, :class_name, :klass

      def initialize(worker_class, payload)
        @payload = payload
        wrapped = payload["wrapped"]
        target = wrapped || worker_class
        @class_name = target.is_a?(Class) || target.is_a?(Module) ? target.name.to_s : target.to_s
        @klass = resolve(target)
      end

      def active_job?
        !@payload["wrapped"].nil?
      end

      # The perform arguments: ActiveJob's serialized arguments for a wrapped job (as
      # sidekiq-fair_tenant passes them to fair_tenant), else Sidekiq's args.
      def arguments
        args = active_job? ? @payload.dig("args", 0, "arguments") : @payload["args"]
        args.is_a?(Array) ? args : []
      end

      # The raw rules: from the payload (sidekiq_options are merged into it at push), else from
      # the class when it was pushed by name and is loaded here.
      def raw_rules
        return @payload["fair_tenant_queues"] if @payload.key?("fair_tenant_queues")
        return nil unless @klass.respond_to?(:get_sidekiq_options)

        @klass.get_sidekiq_options["fair_tenant_queues"]
      end

      def raw_mode
        return @payload["fair_tenant_mode"] if @payload.key?("fair_tenant_mode")
        return nil unless @klass.respond_to?(:get_sidekiq_options)

        @klass.get_sidekiq_options["fair_tenant_mode"]
      end

      # False when the class names its queue (sidekiq_options queue, or ActiveJob's queue_as) and
      # `queue` is another one; true when they match or the class's queue is unknown here (the
      # class is not loaded, or queue_as takes a block).
      def class_queue?(queue)
        own = own_queue
        own.nil? || own == queue.to_s
      end

      # job["fair_tenant"], else the class's fair_tenant(*args), else job["apartment"]; nil when
      # none gives a non-empty value.
      def tenant
        present(@payload["fair_tenant"]) ||
          (@klass.respond_to?(:fair_tenant) && present(@klass.fair_tenant(*arguments))) ||
          present(@payload["apartment"])
      end

      # What "the same job" means for counting once: ActiveJob's job_id survives ActiveJob's own
      # retries (which push a new Sidekiq jid); Sidekiq's jid survives Sidekiq's retries.
      def identity
        job_id = active_job? && @payload.dig("args", 0, "job_id")
        job_id ? "aj:#{job_id}" : @payload["jid"].to_s
      end

      private

      def own_queue
        queue = if active_job?
                  @klass.queue_name if @klass.respond_to?(:queue_name)
                elsif @klass.respond_to?(:get_sidekiq_options)
                  @klass.get_sidekiq_options["queue"]
                end
        case queue
        when String, Symbol then queue.to_s
        end
      end

      def present(value)
        # A BasicObject (from a fair_tenant method) has neither nil? nor to_s: no tenant.
        return nil if nil.equal?(value) || false.equal?(value) || !Validate.responds_to?(value, :to_s)

        string = value.to_s
        string.empty? ? nil : string
      end

      def resolve(target)
        return target if target.is_a?(Class) || target.is_a?(Module)

        Object.const_get(target.to_s)
      rescue NameError
        nil # pushed by name from a process that does not load the class: no class method to call
      end
    end
  end
end
