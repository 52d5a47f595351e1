# frozen_string_literal: true

require "json"
require_relative "../table"

module Ferrolock
  class Admin
    class Cli
      # What each `ferrolock` command prints: a table (default) or JSON (--json).
      class Output
        def initialize(out, json:)
          @out = out
          @json = json
        end

        def locks(items)
          emit(items) { locks_table(items) }
        end

        def limiters(items)
          emit(items) { limiters_table(items) }
        end

        # limits_concurrency keys: the limit (an operator's override first, as limiters'), the jobs
        # holding slots (job_id and lease left) and the line.
        def concurrency(items)
          emit(items) do
            rows = items.map do |c|
              holders = c.holders.map { |h| "#{h.token} (#{h.ttl.round(1)} s)" }.join(" ")
              [c.key, Table.overridden(Table.text(c.limit), c.override), holders, c.blocked, c.oldest_job_id,
               c.oldest_age&.round(1)]
            end
            Table.render(%w[KEY LIMIT HOLDERS BLOCKED OLDEST_BLOCKED OLDEST_AGE], rows)
          end
        end

        # Admin#stats: each primitive's event totals and busiest step, then its waits' and holds' percentiles.
        def stats(stats)
          return @out.puts(JSON.pretty_generate(stats)) if @json

          per = stats[:step] == 60 ? "MINUTE" : "HOUR"
          @out.puts(Table.render(["KIND", "EVENT", "TOTAL", "BUSIEST_#{per}"], stats_events(stats[:primitives])))
          { waits: "WAITS", holds: "HOLDS" }.each do |histogram, title|
            rows = stats_percentiles(stats[:primitives], histogram)
            @out.puts("\n#{Table.render(["KIND", title, "P50", "P95", "P99"], rows)}") unless rows.empty?
          end
        end

        def tenants(items)
          emit(items) do
            rows = items.map { |t| [t.job_class, t.tenant, t.mode, t.queue, rule_counts(t)] }
            Table.render(%w[CLASS TENANT MODE ROUTED_TO COUNTS], rows)
          end
        end

        def markers(items)
          emit(items) do
            Table.render(%w[QUEUE MESSAGE_ID STATE TOKEN TTL HOLDER SINCE],
                         items.map do |m|
                           [m.queue, m.message_id, m.state, Table.token(m.token), m.ttl, Table.holder(m.holder),
                            Table.since(m.holder)]
                         end)
          end
        end

        def uniques(items)
          emit(items) { uniques_table(items) }
        end

        def rate_limiters(items)
          emit(items) do
            Table.render(%w[NAME KIND LIMIT REMAINING RESET_IN RESERVED],
                         items.map do |r|
                           [r.name, r.kind, Table.rate(r), r.remaining, r.reset_in, r.reserved]
                         end)
          end
        end

        # `ferrolock show NAME`: every primitive held under the name.
        def show(items)
          emit(items) do
            parts = []
            locks = items.reject { |i| %i[concurrent_limiter unique_lock].include?(i.kind) }
            parts << locks_table(locks) unless locks.empty?
            uniques = items.select { |i| i.kind == :unique_lock }
            parts << uniques_table(uniques) unless uniques.empty?
            limiters = items.select { |i| i.kind == :concurrent_limiter }
            limiters.each { |l| parts << limiters_table([l]) << slots_table(l) }
            parts.join("\n\n")
          end
        end

        def released(holds)
          emit(holds) do
            Table.render(%w[RELEASED NAME TOKEN], holds.map { |h| [h.kind, h.name, h.token] })
          end
        end

        # A limit set live (`limit`, `pause`, `resume`): the override now in force.
        def override(name, override)
          return @out.puts(JSON.generate({ name: name }.merge(override.to_h))) if @json

          limit = override.limit ? "limit #{override.limit} (set live)" : "limit as the code passes it"
          @out.puts("#{Table.text(name)}: #{override.paused ? "paused, " : ""}#{limit}")
        end

        # A Shoryuken queue's lock after pause/resume: "orders: paused" or "orders: running".
        def queue_pause(queue, override)
          paused = override&.paused || false
          return @out.puts(JSON.generate(queue: queue, paused: paused)) if @json

          @out.puts("#{Table.text(queue)}: #{paused ? "paused" : "running"}")
        end

        private

        def locks_table(items)
          rows = items.flat_map { |item| item.kind == :dist_mutex ? [mutex_row(item)] : dual_rows(item) }
          Table.render(%w[KIND NAME TOKEN FENCE TTL WAITERS HOLDER SINCE], rows)
        end

        # One row per digest: the push-time jid, else the running job's; the push-time lock's TTL,
        # else the run-time lock's; the run-time holder (the push-time lock has none: its value is a jid).
        def uniques_table(items)
          rows = items.map do |u|
            run = u.running || u.waiting
            [u.digest, u.job_class, u.lock_type, u.jid || run&.holder&.jid, u.stages.join("+"), u.ttl || run&.ttl,
             Table.holder(run&.holder)]
          end
          Table.render(%w[DIGEST CLASS LOCK JID STAGE TTL RUN_HOLDER], rows)
        end

        def limiters_table(items)
          rows = items.map { |l| [l.name, Table.limit(l), l.in_use, l.waiting, l.slots.map(&:ttl).min] }
          Table.render(%w[NAME LIMIT IN_USE WAITING NEXT_EXPIRY], rows)
        end

        def slots_table(limiter)
          rows = limiter.slots.map do |s|
            ["slot", limiter.name, Table.token(s.token), s.ttl, Table.holder(s.holder), Table.since(s.holder)]
          end
          Table.render(%w[KIND NAME TOKEN TTL HOLDER SINCE], rows)
        end

        # An empty list is "[]" (pretty_generate of json < 2.7 prints "[", a blank line, "]").
        def emit(items)
          return @out.puts(items.empty? ? "[]" : JSON.pretty_generate(items.map(&:to_h))) if @json

          @out.puts(yield)
        end

        def stats_events(primitives)
          primitives.flat_map do |primitive, its|
            its[:counts].map do |event, total|
              [primitive, event, total, its[:series].map { |bucket| bucket[:counts].fetch(event, 0) }.max]
            end
          end
        end

        # Percentiles (of :waits or :holds) are histogram steps' upper bounds: whole milliseconds.
        def stats_percentiles(primitives, histogram)
          primitives.filter_map do |primitive, its|
            times = its[histogram]
            next unless times[:samples].positive?

            [primitive, times[:samples], *times.values_at(:p50, :p95, :p99).map { |s| "#{(s * 1000).round} ms" }]
          end
        end

        def mutex_row(lock)
          ["dist_mutex", lock.name, Table.token(lock.token), lock.fencing_token, lock.ttl, lock.waiters,
           Table.holder(lock.holder), Table.since(lock.holder)]
        end

        def dual_rows(lock)
          { "exec" => lock.exec, "wait" => lock.wait }.filter_map do |stage, held|
            held && ["dual_lock:#{stage}", lock.name, Table.token(held.token), nil, held.ttl, nil,
                     Table.holder(held.holder), Table.since(held.holder)]
          end
        end

        def rule_counts(tenant)
          return nil if tenant.rules.empty?

          tenant.rules.map { |r| "#{r.queue} #{r.counted}/#{r.threshold} in #{Table.text(r.per.to_f)}" }.join(", ")
        end
      end
    end
  end
end
