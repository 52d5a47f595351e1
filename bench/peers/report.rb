# frozen_string_literal: true

module PeersBench
  # Markdown tables of bench/peers.rb's results: one per configuration, a row per implementation,
  # ours first; "ferrolock ÷ this" is ours divided by the row's rate (above 1: ours is faster). The
  # io section's tables end with the no-lock ceiling and a line of ratios under them.
  module Report
    COLUMNS = [["wait p50 (ms)", :wait_p50_ms, "%<v>.3f"], ["wait p99 (ms)", :wait_p99_ms, "%<v>.3f"],
               ["wait max (ms)", :wait_max_ms, "%<v>.1f"],
               ["hand-off p50 (ms)", :p50_ms, "%<v>.3f"], ["hand-off p99 (ms)", :p99_ms, "%<v>.3f"],
               ["hand-offs to another worker", :moved, nil], ["hand-offs to another process", :moved_process, nil],
               ["busiest worker's share", :busiest, nil],
               ["client commands per %s", :sent, "%<v>.1f"], ["Redis commands per %s", :commands, "%<v>.1f"],
               ["Redis CPU per %s (µs)", :cpu_us, "%<v>.1f"], ["failed acquires (retried)", :errors, "%<v>d"]].freeze
    # Measures that mean nothing for one worker alone.
    ALONE_SKIPS = %i[p50_ms p99_ms moved moved_process busiest].freeze

    NOTES = <<~NOTES.strip
      - Workers: ferrolock and Python = threads (each with its own lock object and connection) in forked
        processes / separate interpreters; rslock = OS threads, each with its own current-thread tokio runtime
        and LockManager; node = async loops in one node process sharing one ioredis connection.
      - Settings: the same 10 s lease for all, otherwise library defaults. rslock: 3 tries per lock() 0-200 ms
        apart, acquire() calls lock() until it succeeds. redis-semaphore: retries every 10 ms, acquireTimeout
        10 s. redlock: retryCount 10, retryDelay 200 ms, retryJitter 200 ms (a failed lock() is retried and
        counted). redis-py: SET NX retried every 100 ms. python-redis-lock: SET NX, then BLPOP on a signal list.
        pottery: SET NX retried after a random 0-200 ms. ferrolock: DistMutex / ConcurrentLimiter defaults,
        but the one option its "fair: false" and "fencing: false" rows name.
      - Wait: from a worker asking for the lock (its failed tries included) to entering, each worker's first
        section left out (it connects). Hand-off: from a release to the next entry; "to another worker" /
        "to another process": the share of hand-offs whose next holder is another worker / in another process.
      - Empty sections: two timestamps. io sections: INCR then DECR of one key on a second Redis, through each
        language's client (redis-rb, ioredis, redis-py, the redis crate), one connection per worker (node: per
        process); the ceiling runs the same redis-rb section with no lock, and "in series" one worker running
        it back to back (what `slots` holders running redis-rb sections can pass). "Redis commands" counts every
        command the lock's Redis ran (INFO commandstats, inside scripts too; the second Redis is not counted),
        "client commands" those the clients sent (EVALSHA, SET, ...: the slow log, logging every command for
        the run, tells them from those run inside scripts), "Redis CPU" is its INFO cpu (sys + user), all per
        section and including the setup of connections; INFO is not counted. The slow log costs the server a
        little CPU per command, the same for everyone.
    NOTES

    module_function

    # How the run was pinned, and the 2-round-trip ceiling measured before and after the tables.
    def header(pinning, ceilings)
      rates = ceilings.map { |c| c.is_a?(String) ? c : "#{Bench.number(c)}/s" }
      "- #{pinning}.\n- 2-round-trip ceiling of an uncontended lock+unlock cycle (redis-benchmark SET over one " \
        "connection, ÷ 2), before / after the tables: #{rates.join(" / ")}."
    end

    def tables(kind, section, results)
      unit = kind == :mutex ? "section" : "block"
      results.group_by { |_, config, _| config }.map do |(workers, processes), rows|
        lines = table(unit, section, workers, processes, rows)
        next "#{lines}\n\n#{ratios(kind, workers, rows)}" if section == :io
        next "#{lines}\n\n#{ceiling_ratio(rows)}" if workers == 1 && PeersBench.ceilings.first.is_a?(Float)

        lines
      end.join("\n\n")
    end

    # A lone worker's cycles against the 2-round-trip ceiling measured before the tables.
    def ceiling_ratio(rows)
      ceiling = PeersBench.ceilings.first
      measured = rows.reject { |_, _, r| r.is_a?(String) }
      parts = measured.map { |label, _, r| format("%<l>s %<s>.2f", l: label, s: r[:sections] / ceiling) }
      "Share of the 2-round-trip ceiling (#{Bench.number(ceiling)} cycles/s): #{parts.join("; ")}."
    end

    # ours / the fastest peer, and ours / (the ceiling × slots / workers): the share of the section's
    # no-lock rate that `slots` of `workers` inside at once could reach.
    def ratios(kind, workers, rows)
      ours = rows.first[2]
      peers = rows.drop(1).reject do |label, _, r|
        [CEILING, SERIAL].include?(label) || label.start_with?("ferrolock") || r.is_a?(String)
      end
      ceiling = rows.find { |label, _, _| label == CEILING }&.last
      serial = rows.find { |label, _, r| label == SERIAL && !r.is_a?(String) }&.last
      parts = []
      if (fastest = peers.max_by { |_, _, r| r[:sections] })
        parts << format("ours / fastest peer (%s): %.2fx", fastest[0], ours[:sections] / fastest[2][:sections])
        unfair = rows.find { |label, _, r| label == PeersBench::UNFAIR.fetch(kind) && !r.is_a?(String) }
        parts << format("fair: false / that peer: %.2fx", unfair[2][:sections] / fastest[2][:sections]) if unfair
      end
      if ceiling
        bound = ceiling[:sections] * PeersBench.slots(kind) / workers
        parts << format("ceiling × %d / %d = %s/s; ours: %.0f %% of it", PeersBench.slots(kind), workers,
                        Bench.number(bound), 100 * ours[:sections] / bound)
      end
      parts << serial_share(kind, rows, serial) if serial
      "Ratios: #{parts.join("; ")}."
    end

    # ours and unfair against one worker's sections in series × slots (the bound of `slots` holders, each
    # running redis-rb sections back to back).
    def serial_share(kind, rows, serial)
      bound = serial[:sections] * PeersBench.slots(kind)
      shares = rows.filter_map do |label, _, r|
        format("%s %.0f %%", label, 100 * r[:sections] / bound) if label.start_with?("ferrolock") && !r.is_a?(String)
      end
      format("one worker in series × %d = %s/s; of it: %s", PeersBench.slots(kind), Bench.number(bound),
             shares.join(", "))
    end

    def table(unit, section, workers, processes, rows)
      columns = COLUMNS.reject do |_, key, _|
        (workers == 1 && ALONE_SKIPS.include?(key)) || rows.all? { |_, _, r| r.is_a?(String) || r[key].nil? }
      end
      ours = rows.first[2]
      head = "| #{title(unit, section, workers, processes)} | #{unit}s/s | ferrolock ÷ this | " \
             "#{columns.map { |label, _, _| format(label, unit) }.join(" | ")} |"
      lines = [head, "|---|---:|---:|#{"---:|" * columns.size}"]
      rows.each { |label, _, result| lines << row(label, result, ours, columns) }
      lines.join("\n")
    end

    def title(unit, section, workers, processes)
      what = section == :io ? "#{unit}s doing INCR + DECR on a second Redis" : "empty #{unit}s"
      return "alone: lock+release cycles, 1 worker, #{what}" if workers == 1

      "#{workers} workers / #{processes} processes, one name, #{what}"
    end

    def row(label, result, ours, columns)
      return "| #{label} | #{result} |#{" |" * (columns.size + 1)}" if result.is_a?(String)

      cells = columns.map { |_, key, fmt| Bench::Contention.cell(key, result[key], fmt) }
      "| #{label} | #{Bench.number(result[:sections])} | #{format("%.2fx", ours[:sections] / result[:sections])} | " \
        "#{cells.join(" | ")} |"
    end
  end
end
