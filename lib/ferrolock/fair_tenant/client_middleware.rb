# frozen_string_literal: true

module Ferrolock
  module FairTenant
    # Sidekiq client middleware rerouting a greedy tenant's jobs to slower queues, configured
    # exactly like sidekiq-fair_tenant. Add it to the client chain of clients AND servers (jobs
    # enqueue jobs):
    #
    #   Sidekiq.configure_client { |c| c.client_middleware { |m| m.add Ferrolock::FairTenant::ClientMiddleware } }
    #   Sidekiq.configure_server do |c|
    #     c.client_middleware { |m| m.add Ferrolock::FairTenant::ClientMiddleware }
    #     c.on(:startup) { Ferrolock::FairTenant.verify! }
    #   end
    #
    # Options (`m.add Ferrolock::FairTenant::ClientMiddleware, client: my_client`): client:, a
    # Ferrolock::Client (default Ferrolock.client).
    class ClientMiddleware
      OPTIONS = %i[client].freeze

      # Sidekiq 6 builds one instance per push, so this stays cheap.
      def initialize(options = {})
        Ferrolock::Sidekiq::Compat.check!
        unknown = options.keys.map(&:to_sym) - OPTIONS
        raise ArgumentError, "unknown option#{"s" if unknown.size > 1}: #{unknown.join(", ")}" unless unknown.empty?

        @client = options[:client] || options["client"]
      end

      # Returns yield's result, as Sidekiq requires. Never stops a push.
      def call(worker_class, job, queue, _redis_pool)
        reroute(worker_class, job, queue) if job.is_a?(Hash)
        yield
      end

      private

      def reroute(worker_class, payload, queue)
        # Another middleware already moved this job: its choice stands.
        return if payload["queue"] != queue

        job = Job.new(worker_class, payload)
        rules = Rules.parse(job.raw_rules)
        return if rules.nil?

        tenant = job.tenant
        return FairTenant.warn_no_tenant(job.class_name) if tenant.nil?

        payload["fair_tenant"] = tenant
        route(job, rules, tenant, queue)
      end

      def route(job, rules, tenant, queue)
        client = Validate.client!(@client)
        return if FairTenant.paused?(client)

        payload = job.payload
        # A job we rerouted before (now retried or scheduled) is judged against its own queue.
        origin = payload["fair_tenant_origin"] || queue
        target = FairTenant.queue_for(rules, job_class: job.class_name, tenant: tenant, jid: job.identity,
                                             queue: origin, mode: job.raw_mode, client: client,
                                             record: !payload["fair_tenant_counted"])
        payload["fair_tenant_counted"] = true
        apply(job, tenant, origin, target)
      rescue Ferrolock::Error => e
        FairTenant.redis_failed(e, client, job.class_name, queue)
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
