# frozen_string_literal: true

module Ferrolock
  class Admin
    # One name's history (Ferrolock::History) read back: per primitive, each event's total, the
    # waits' and holds' percentiles, and a series per bucket (minutes up to 8 hours back, hours beyond).
    #
    #   Ferrolock::Admin.new.stats("erp", since: 3600)
    #   # => { name: "erp", since: 3600, step: 60, from: 1764338400, to: 1764342000,
    #   #      primitives: { "concurrent_limiter" => { counts: { "acquired" => 120, "over_limit" => 3 },
    #   #        waits: { samples: 123, p50: 0.001, p95: 0.256, p99: 1.024 },
    #   #        series: [{ at: 1764338400, counts: { "acquired" => 2 }, waits: [...] }, ...] } } }
    #
    # Percentiles are the upper bound of their histogram step (powers of two of a millisecond).
    module Stats
      MAX_SINCE = History::Buckets::HOUR.keep
      UNITS = { "" => 1, "s" => 1, "m" => 60, "h" => 3600, "d" => 86_400 }.freeze
      PERCENTILES = { p50: 0.5, p95: 0.95, p99: 0.99 }.freeze

      module_function

      def read(client, name, since, now: Time.now.to_i)
        name = Validate.text!(:name, name)
        since = since!(since)
        step, starts = buckets(since, now)
        rows = History::Store.read(client, step, starts, name)
        { name: name, since: since, step: step.seconds, from: starts.first, to: starts.last + step.seconds,
          primitives: rows.group_by { |row| row[1] }.sort.to_h.transform_values { |its| summary(its, starts) } }
      end

      # The step (minutes up to 8 hours back, hours beyond) and the starts of its buckets since then.
      def buckets(since, now = Time.now.to_i)
        step = since <= History::Buckets::MINUTE.keep ? History::Buckets::MINUTE : History::Buckets::HOUR
        first = History::Buckets.start_of(now - since, step)
        [step, (first..History::Buckets.start_of(now, step)).step(step.seconds).to_a]
      end

      # Seconds back, at most 72 hours: a positive Integer, or text such as "90", "15m", "1h", "3d".
      def since!(value)
        seconds = value.is_a?(String) ? parse(value) : value
        raise TypeError, "since must be an Integer of seconds or text like \"1h\", got #{Validate.show(value)}" \
          unless seconds.is_a?(Integer)
        return seconds if seconds.between?(1, MAX_SINCE)

        raise ArgumentError, "since must be between 1 second and #{MAX_SINCE / 3600} hours, got #{Validate.show(value)}"
      end

      def parse(text)
        number, unit = text.strip.match(/\A(\d+)([smhd]?)\z/)&.captures
        raise ArgumentError, "since: expected a number and s, m, h or d (\"1h\"), got #{text.inspect}" unless number

        Integer(number, 10) * UNITS.fetch(unit)
      end

      def summary(rows, starts)
        steps, events = rows.partition { |_, _, counter, _| step_of(counter) }
        holds, waits = steps.partition { |_, _, counter, _| History::Buckets.hold?(counter) }
        { counts: totals(events), waits: percentiles(waits), holds: percentiles(holds),
          series: series(events, waits, holds, starts) }
      end

      def totals(events)
        events.each_with_object(Hash.new(0)) { |(_, _, event, count), sums| sums[event] += count }.sort.to_h
      end

      def series(events, waits, holds, starts)
        by_start = events.group_by(&:first)
        waits_by_start = waits.group_by(&:first)
        holds_by_start = holds.group_by(&:first)
        starts.map do |start|
          { at: start, counts: totals(by_start.fetch(start, [])),
            waits: percentiles(waits_by_start.fetch(start, [])), holds: percentiles(holds_by_start.fetch(start, [])) }
        end
      end

      # { samples:, p50:, p95:, p99: } of one histogram's rows, waits' or holds' (seconds; nil without samples).
      def percentiles(rows)
        steps = rows.each_with_object(Hash.new(0)) { |(_, _, counter, count), sums| sums[step_of(counter)] += count }
        samples = steps.values.sum
        sorted = steps.sort
        PERCENTILES.each_with_object({ samples: samples }) do |(label, share), out|
          rank = (share * samples).ceil
          step = sorted.find { |(_, count)| (rank -= count) <= 0 }&.first
          out[label] = step && History::Buckets.wait_bound(step)
        end
      end

      def step_of(counter)
        History::Buckets.step_of(counter)
      end
    end
  end
end
