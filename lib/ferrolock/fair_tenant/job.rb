# frozen_string_literal: true

module Ferrolock
  module FairTenant
    # What the middleware needs to know about one job payload: its class (the wrapped class for
    # ActiveJob, see Ferrolock::Job), its arguments, rules, tenant and identity.
    class Job
      attr_reader :payload, :class_name, :klass

      def initialize(worker_class, payload)
        @payload = payload
        @job = Ferrolock::Job.from_sidekiq(payload, worker_class)
        @class_name = @job.class_name
        @klass = resolve
      end

      def active_job?
        @job.active_job?
      end

      # The perform arguments: ActiveJob's serialized arguments for a wrapped job (as
      # sidekiq-fair_tenant passes them to fair_tenant), else Sidekiq's args.
      def arguments
        args = @job.arguments
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
        job_id = @job.job_id
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

      # nil when pushed by name from a process that does not load the class: no class method to call.
      def resolve
        klass = @job.job_class
        klass.is_a?(Module) ? klass : nil
      rescue TypeError
        nil
      end
    end
  end
end
