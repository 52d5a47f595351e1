# frozen_string_literal: true

require_relative "../fake"

module Ferrolock
  module Testing
    module Fake
      # Native::FairTenant.check in memory, counting in whole milliseconds of Testing.now as the
      # scripts count in Redis TIME (ext/ferrolock-core/lua/fair_tenant/): :exact keeps each jid's
      # first time, :bounded keeps two buckets per window and estimates the sliding count.
      module FairTenant
        # Bounded mode's counts for one window: its bucket number, that bucket's and the previous one's.
        Buckets = Struct.new(:at, :current, :previous)

        class << self
          # The index (1-based) of the last rule broken once this enqueue is counted, or 0.
          def check(store, client, rules, job_class, tenant, jid, mode, record) # rubocop:disable Metrics/ParameterLists -- Native::FairTenant.check's
            now = (Testing.now * 1000).floor
            pers = rules.pers.map { |per| (per * 1000).floor }
            store.synchronize do
              counts = store.table(:"fair_tenant_#{mode}")[Fake.place(client, job_class, tenant)] ||= {}
              within = if mode == "exact"
                         exact(counts, now, pers, jid, record)
                       else
                         bounded(counts, now, pers, record)
                       end
              last_broken(rules.thresholds, pers, within)
            end
          end

          private

          def last_broken(thresholds, pers, within)
            index = (thresholds.size - 1).downto(0).find { |i| within.call(pers[i]) > thresholds[i] }
            index ? index + 1 : 0
          end

          # counts: jid => ms of its first enqueue.
          def exact(counts, now, pers, jid, record)
            longest = pers.max
            counts.delete_if { |_, at| at <= now - longest }
            counts[jid] ||= now if record
            ->(per) { counts.count { |_, at| at > now - per } }
          end

          # counts: window (ms) => Buckets.
          def bounded(counts, now, pers, record)
            pers.uniq.each do |per|
              buckets = counts[per] ||= Buckets.new(nil, 0, 0)
              roll(buckets, now / per, record)
            end
            ->(per) { counts[per].current + (counts[per].previous * (per - (now % per)) / per.to_f) }
          end

          def roll(buckets, bucket, record)
            if buckets.at == bucket
              buckets.current += 1 if record
            else
              buckets.previous = buckets.at == bucket - 1 ? buckets.current : 0
              buckets.current = record ? 1 : 0
              buckets.at = bucket
            end
          end
        end
      end
    end
  end
end
