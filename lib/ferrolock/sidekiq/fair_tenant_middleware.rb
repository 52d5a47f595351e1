# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    # Sidekiq client middleware rerouting a greedy tenant's jobs to slower queues, configured
    # exactly like sidekiq-fair_tenant. Add it to the client chain of clients AND servers (jobs
    # enqueue jobs):
    #
    #   Sidekiq.configure_client { |c| c.client_middleware { |m| m.add Ferrolock::Sidekiq::FairTenantMiddleware } }
    #   Sidekiq.configure_server do |c|
    #     c.client_middleware { |m| m.add Ferrolock::Sidekiq::FairTenantMiddleware }
    #     c.on(:startup) { Ferrolock::FairTenant.verify! }
    #   end
    #
    # Ferrolock::FairTenant::ClientMiddleware is its deprecated name (see fair_tenant.rb). Options
    # (`m.add Ferrolock::Sidekiq::FairTenantMiddleware, client: my_client`): client:, a
    # Ferrolock::Client (default Ferrolock.client).
    class FairTenantMiddleware
      OPTIONS = %i[client].freeze
      # Also as Strings (options that went through a config file).
      KNOWN_KEYS = (OPTIONS + OPTIONS.map(&:to_s)).freeze

      # Sidekiq 6 builds one instance per push, so this stays cheap.
      def initialize(options = {})
        Compat.check!
        Validate.options!(options, KNOWN_KEYS, self.class.name)
        @client = options[:client] || options["client"]
        Validate.client!(@client) unless nil.equal?(@client)
      end

      # Returns yield's result, as Sidekiq requires. Never stops a push.
      def call(worker_class, job, queue, _redis_pool)
        return yield if Backend.pass_through? # Ferrolock::Testing.disable!

        reroute(worker_class, job, queue) if job.is_a?(Hash)
        yield
      end

      private

      def reroute(worker_class, payload, queue)
        # Another middleware already moved this job: its choice stands.
        return if payload["queue"] != queue

        job = FairTenant::Job.new(worker_class, payload)
        rules = FairTenant::Rules.parse_for(job.class_name, job.raw_rules)
        return if rules.nil?
        # Pushed to a queue of its own choosing (`set(queue: ...)`): not the class's traffic, so not
        # counted and not rerouted, as with sidekiq-fair_tenant. A job we rerouted earlier (a retry)
        # is judged by the queue it came from.
        return unless job.class_queue?(payload["fair_tenant_origin"] || queue)

        tenant = job.tenant
        return FairTenant.warn_no_tenant(job.class_name) if tenant.nil?

        tenant = usable_tenant(job, tenant) or return
        payload["fair_tenant"] = tenant
        route(job, rules, tenant, queue)
      end

      # The tenant as queue_for takes it, or nil (logged; the job is pushed unthrottled) when it
      # cannot name a key: over MAX_NAME_BYTES or not UTF-8. A push never fails for its tenant.
      def usable_tenant(job, tenant)
        Validate.id!(:tenant, tenant)
      rescue ArgumentError, TypeError => e
        Ferrolock.log(:warn, "ferrolock FairTenant: #{job.class_name}: #{e.message}; pushed unthrottled")
        nil
      end

      def route(job, rules, tenant, queue)
        client = Validate.client!(@client)
        return if FairTenant.paused?(client)

        payload = job.payload
        # A job we rerouted before (now retried or scheduled) is judged against its own queue.
        origin = payload["fair_tenant_origin"] || queue
        target = FairTenant.queue_for(rules, job_class: job.class_name, tenant: tenant, jid: job.identity,
                                             queue: origin, mode: job.raw_mode, client: client,
                                             record: !counted?(payload))
        payload["fair_tenant_counted"] = true
        apply(job, tenant, origin, target)
      rescue Ferrolock::Error => e
        FairTenant.redis_failed(e, client, job.class_name, queue)
      end

      # Counted at an earlier push: this very payload (a retry, a scheduled job coming due), or the
      # running job enqueuing itself again to go on (a continuation resuming: a new payload, same job).
      def counted?(payload)
        payload["fair_tenant_counted"] || !RunningJob.resumed_jid(payload).nil?
      end

      def apply(job, tenant, origin, target)
        payload = job.payload
        if target == origin
          payload.delete("fair_tenant_origin")
        else
          payload["fair_tenant_origin"] = origin
        end
        return if payload["queue"] == target

        Ferrolock.instrument(:rerouted, primitive: :fair_tenant, job_class: job.class_name, tenant: tenant,
                                        jid: payload["jid"], from: payload["queue"], queue: target)
        payload["queue"] = target
      end
    end
  end
end
