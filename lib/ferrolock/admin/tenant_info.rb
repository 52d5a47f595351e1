# frozen_string_literal: true

require_relative "reading"

module Ferrolock
  class Admin
    TENANT_PREFIX = "ft:"

    # One fair_tenant_queues rule's state for a tenant: `counted` enqueues within `per` seconds
    # (estimated in :bounded mode) against its threshold.
    RuleCount = Struct.new(:queue, :threshold, :per, :counted, keyword_init: true) do
      def broken?
        counted > threshold
      end
    end

    # A (job class, tenant)'s counters and the queue its next enqueue goes to: that of the last
    # broken rule, else the class's own queue (nil when the class or its rules are not loaded here).
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

      # [job class, tenant] of a key name `ft:<class>:<tenant>` (both percent-escaped; the tenant
      # has no ':' left, so the last ':' splits them), or nil.
      def self.split(name)
        return nil unless name.start_with?(TENANT_PREFIX)

        job_class, _, tenant = name.delete_prefix(TENANT_PREFIX).rpartition(":")
        return nil if job_class.empty? || tenant.empty?

        [unescape(job_class), unescape(tenant)]
      end

      # The name prefix of a job class's tenants (escaped as fair_tenant.rs does).
      def self.class_name(job_class)
        "#{TENANT_PREFIX}#{job_class.gsub(/[%{}]/) { |c| format("%%%02X", c.ord) }}:"
      end

      def self.unescape(text)
        text.gsub(/%(7B|7D|3A|25)/i) { Regexp.last_match(1).hex.chr }
      end

      # `config`: the class's [rules (FairTenant::Rules or nil), default queue or nil].
      def self.read(client, keys, name, part, config)
        parts = split(name) or return nil
        job_class, tenant = parts
        rules, default_queue = config
        counts = rule_counts(client, keys.key(name, part), part, rules)
        broken = counts.rindex(&:broken?)
        new(job_class: job_class, tenant: tenant, mode: part == "z" ? :exact : :bounded, rules: counts,
            queue: broken ? counts[broken].queue : default_queue)
      end

      def self.rule_counts(client, key, part, rules)
        return [] if rules.nil?

        now = Reading.now_ms(client)
        rules.size.times.map do |i|
          per_ms = (rules.pers[i] * 1_000_000_000).round / 1_000_000
          counted = part == "z" ? exact(client, key, now, per_ms) : bounded(client, key, now, per_ms)
          RuleCount.new(queue: rules.queues[i], threshold: rules.thresholds[i], per: rules.pers[i], counted: counted)
        end
      end

      # Scores are whole ms: "within per" is score >= now - per + 1 (fair_tenant/exact.lua).
      def self.exact(client, key, now, per_ms)
        client.call("ZCOUNT", key, now - per_ms + 1, "+inf")
      end

      # The estimate of fair_tenant/bounded.lua: current bucket + the part of the previous one
      # still inside the window.
      def self.bounded(client, key, now, per_ms)
        at, cur, prev = client.call("HMGET", key, "b#{per_ms}", "c#{per_ms}", "p#{per_ms}").map(&:to_i)
        bucket = now / per_ms
        # The window moved on since the last enqueue: the stored current bucket is the previous
        # one if adjacent, else both are empty (missing fields read as 0).
        cur, prev = { bucket => [cur, prev], bucket - 1 => [0, cur] }.fetch(at, [0, 0])
        (cur + (prev * (per_ms - (now % per_ms)) / per_ms.to_f)).round(2)
      end
      private_class_method :rule_counts, :exact, :bounded, :unescape
    end
  end
end
