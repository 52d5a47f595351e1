# frozen_string_literal: true

module Ferrolock
  class Admin
    # One primitive's history (Ferrolock::History) over the last since seconds: its busiest names
    # (event totals, most events first) and its events per bucket, all names together.
    #
    #   Ferrolock::Admin.new.kind_stats(:concurrent_limiter, since: "8h")
    #   # => { kind: "concurrent_limiter", since: 28800, step: 60, from: …, to: …,
    #   #      names: [{ name: "erp", total: 123, counts: { "acquired" => 120, "over_limit" => 3 } }, …],
    #   #      series: [{ at: 1764338400, counts: { "acquired" => 2 } }, …] }
    module KindStats
      TOP = 10

      module_function

      def read(client, kind, since, top: TOP)
        kind = Validate.text!(:kind, kind.to_s)
        raise ArgumentError, "kind must not contain #{History::Buckets::SEPARATOR.inspect}" if kind.include?("|")

        step, starts = Stats.buckets(Stats.since!(since))
        rows = History::Store.read_kind(client, step, starts, kind)
        { kind: kind, since: Stats.since!(since), step: step.seconds, from: starts.first,
          to: starts.last + step.seconds, names: busiest(rows, top), series: series(rows, starts) }
      end

      def busiest(rows, top)
        entries = rows.group_by { |row| row[2] }.map do |name, its|
          counts = totals(its)
          { name: name, total: counts.values.sum, counts: counts }
        end
        entries.max_by(top) { |entry| entry[:total] }
      end

      def series(rows, starts)
        by_start = rows.group_by(&:first)
        starts.map { |start| { at: start, counts: totals(by_start.fetch(start, [])) } }
      end

      # { event => count } of [start, event, name, count] rows.
      def totals(rows)
        rows.each_with_object(Hash.new(0)) { |(_, event, _, count), sums| sums[event] += count }.sort.to_h
      end
    end
  end
end
