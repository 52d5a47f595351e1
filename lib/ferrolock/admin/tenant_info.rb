# frozen_string_literal: true

require_relative "rule_count"

module Ferrolock
  class Admin
    # A (job class, tenant)'s counters and the queue its next enqueue goes to: that of the last
    # broken rule, else the class's own queue (nil when the class or its rules are not loaded here).
    # The names and counters are the core's (fair_tenant/inspect.rs, Native::Admin.tenant_state).
    TenantInfo = Struct.new(:job_class, :tenant, :mode, :rules, :queue, keyword_init: true) do
      def kind
        :fair_tenant
      end

      def name
        "#{job_class} #{tenant}"
      end

      def to_h
        { kind: kind, job_class: job_class, tenant: tenant, mode: mode, queue: queue, rules: rules.map(&:to_h) }
      end

      # [job class, tenant] of a FairTenant name, or nil.
      def self.split(name)
        Native::Admin.tenant_of(name)
      end

      # The name prefix of a job class's tenants.
      def self.class_name(job_class)
        Native::Admin.tenant_prefix(job_class)
      end

      # `config`: the class's [rules (FairTenant::Rules or nil), default queue or nil]; nil for a
      # name or part that is no tenant's.
      def self.read(client, name, part, config)
        rules, default_queue = config
        state = Native::Admin.tenant_state(client.native, name, part, rules ? rules.pers.map(&:to_f) : [])
        return nil unless state

        counts = state[:counted].each_with_index.map do |counted, i|
          RuleCount.new(queue: rules.queues[i], threshold: rules.thresholds[i], per: rules.pers[i], counted: counted)
        end
        broken = counts.rindex(&:broken?)
        new(job_class: state[:job_class], tenant: state[:tenant], mode: state[:mode].to_sym, rules: counts,
            queue: broken ? counts[broken].queue : default_queue)
      end
    end
  end
end
