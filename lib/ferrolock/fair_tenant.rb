# frozen_string_literal: true

require_relative "fair_tenant/config"
require_relative "fair_tenant/rules"
require_relative "fair_tenant/job"
require_relative "fair_tenant/verify"

module Ferrolock
  # Fair queueing per tenant: each (job class, tenant)'s enqueues are counted in sliding windows
  # (one Lua script, one round trip per enqueue, Redis time) and a greedy tenant's jobs go to the
  # queue of the last rule it breaks. See Ferrolock::Sidekiq::FairTenantMiddleware for Sidekiq.
  module FairTenant
    # After ferrolock's Redis failed, enqueues skip it for this long (pushed unchanged), so an
    # outage costs one read timeout, not one per enqueue.
    FAILURE_PAUSE = 5.0

    STATE_LOCK = Mutex.new
    private_constant :STATE_LOCK
    @warned = {}
    @paused_until = {}

    # Ferrolock.configure { |c| c.fair_tenant_mode = :bounded }
    Configuration.include(Config)
    # FairTenant::ClientMiddleware: the deprecated name of Ferrolock::Sidekiq::FairTenantMiddleware.
    Deprecation.renamed_constants(self, ClientMiddleware: "Ferrolock::Sidekiq::FairTenantMiddleware")

    class << self
      # The queue for one enqueue: that of the last rule broken once this enqueue is counted, else
      # `queue`. `record: false` checks without counting (the job was counted at an earlier push);
      # in :exact mode the same jid is counted once anyway. (All keywords: clearer than a struct.)
      # job_class: a named class or its name; tenant and jid: Strings, Symbols or Integers (all
      # checked as names: non-empty, valid UTF-8, at most MAX_NAME_BYTES), even without rules.
      # rubocop:disable Metrics/ParameterLists
      def queue_for(rules, job_class:, tenant:, jid:, queue:, mode: nil, record: true, client: nil)
        job_class = job_class!(job_class)
        tenant = Validate.id!(:tenant, tenant)
        jid = Validate.id!(:jid, jid)
        mode = mode!(mode)
        client = Validate.client!(client)
        rules = Rules.parse_for(job_class, rules) or return queue
        index = Backend.fair_tenant_check(client, rules, job_class, tenant, jid, mode.to_s, record ? true : false)
        index.zero? ? queue : rules.queue_at(index)
      end
      # rubocop:enable Metrics/ParameterLists

      # The storage mode: the given one (sidekiq_options fair_tenant_mode:), else the global one.
      def mode!(mode)
        return Ferrolock.config.fair_tenant_mode if nil.equal?(mode)

        Config.mode!(:fair_tenant_mode, mode)
      end

      # The Redis key holding a (job class, tenant)'s counts, for inspection.
      def key(job_class, tenant, mode: nil, client: nil)
        part = mode!(mode) == :exact ? "z" : "w"
        tag = Native::FairTenant.tag(job_class!(job_class), Validate.id!(:tenant, tenant))
        Validate.client!(client).key(tag, part)
      end

      # A job class's name as counted: a named class, or its name as a String or Symbol.
      def job_class!(value)
        case value
        when Module
          raise ArgumentError, "job_class must be a named class, got #{Validate.show(value)}" if value.name.nil?

          Validate.text!(:job_class, value.name)
        when String, Symbol then Validate.text!(:job_class, value.to_s)
        else raise TypeError, "job_class must be a class or a class name, got #{Validate.show(value)}"
        end
      end

      # Logs once per job class that its jobs pass unthrottled for want of a tenant.
      def warn_no_tenant(class_name)
        first = STATE_LOCK.synchronize { @warned[class_name] ? false : (@warned[class_name] = true) }
        return unless first

        Ferrolock.log(:warn, "ferrolock FairTenant: #{class_name} has fair_tenant_queues but this job has no " \
                             "tenant (job[\"fair_tenant\"], #{class_name}.fair_tenant(*args) or " \
                             "job[\"apartment\"]); such jobs are pushed unthrottled (logged once per class)")
      end

      # Ferrolock's Redis failed: the caller pushes the job unchanged (never lost); enqueues through
      # this client skip Redis for FAILURE_PAUSE seconds, and the failure is logged once per pause.
      def redis_failed(error, client, class_name, queue)
        STATE_LOCK.synchronize { @paused_until[client] = Ferrolock.monotonic + FAILURE_PAUSE }
        Ferrolock.log(:warn, "ferrolock FairTenant: #{error.class}: #{error.message}; #{class_name} pushed to " \
                             "#{queue.inspect} unthrottled, and enqueues skip fair-tenant counting for " \
                             "#{FAILURE_PAUSE} s")
      end

      # True while enqueues through this client skip Redis after a failure.
      def paused?(client)
        STATE_LOCK.synchronize do
          until_time = @paused_until[client]
          !until_time.nil? && Ferrolock.monotonic < until_time
        end
      end

      # Forgets warnings given and Redis failures seen (tests, or after fixing Redis).
      def reset!
        STATE_LOCK.synchronize do
          @warned = {}
          @paused_until = {}
        end
      end
    end
  end
end
