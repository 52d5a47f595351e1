# frozen_string_literal: true

require "json"
require "redis"

module Bench
  # Many workers (threads spread over forked processes) entering one lock or slot in a loop for
  # a fixed time, with empty sections. Measures what contention costs Redis and how fair it is:
  # sections/s, every command Redis ran per section (INFO commandstats, commands inside scripts
  # included), Redis CPU per section (INFO cpu), hand-off latency (a release to the next entry),
  # the share of hand-offs that go to another worker, and the busiest worker's share.
  module Contention
    CONFIGS = [[8, 2], [32, 4]].freeze
    # Every worker sets up (connects) first, then all start together this long after the first fork,
    # as bench/peers.rb's drivers do: a process forked later or a slow connect costs no worker its
    # share of the run.
    START_MARGIN = 1.0

    module_function

    # `setup.call` builds a worker's state in its own thread; `section.call(state)` enters,
    # returns [entered, left] (Bench.monotonic, system-wide), and has left when it returns.
    # Workers note when they ask (just before calling the section), for the fairness figures.
    # `slots`: how many may be inside at once (a semaphore's limit): the k-th release (by time)
    # hands over to the (k + slots)-th entry.
    def measure(workers:, processes:, seconds:, setup:, section:, slots: 1)
      stats = Redis.new(url: Bench.redis_url)
      before = redis_counters(stats)
      start_at = Bench.monotonic + START_MARGIN
      spans = in_processes(processes, workers / processes, start_at, start_at + seconds, setup, section)
      after = redis_counters(stats)
      summarize(spans, after.zip(before).map { |a, b| a - b }, slots)
    end

    # [commands run (excluding the INFO calls measuring them), Redis CPU seconds].
    def redis_counters(redis)
      commands = redis.info("commandstats").sum { |name, stat| name == "info" ? 0 : stat["calls"].to_i }
      cpu = redis.info("cpu")
      [commands, cpu["used_cpu_sys"].to_f + cpu["used_cpu_user"].to_f]
    end

    # Each worker's spans from start_at to stop_at (Bench.monotonic), its process forked and its
    # state set up before start_at.
    def in_processes(processes, threads, start_at, stop_at, setup, section)
      children = Array.new(processes) do |p|
        read, write = IO.pipe
        pid = fork do
          read.close
          write.write(JSON.dump(run_workers(p, threads, start_at, stop_at, setup, section)))
          exit!(0)
        end
        write.close
        [pid, read]
      end
      children.flat_map do |pid, pipe|
        JSON.parse(pipe.read).tap do
          pipe.close
          Process.wait(pid)
        end
      end
    end

    # Each span: [entered, left, worker id, asked].
    def run_workers(process, threads, start_at, stop_at, setup, section)
      Array.new(threads) do |t|
        Thread.new do
          state = setup.call
          sleep([start_at - Bench.monotonic, 0].max)
          spans = []
          while Bench.monotonic < stop_at
            asked = Bench.monotonic
            entered, left = section.call(state)
            spans << [entered, left, "#{process}.#{t}", asked]
          end
          spans
        end
      end.flat_map(&:value)
    end

    def summarize(spans, deltas, slots)
      count = spans.size
      wall = spans.map { |s| s[1] }.max - spans.map(&:first).min
      pairs = handoffs(spans, slots)
      gaps = pairs.map { |(_, left, _), (entered, _, _)| entered - left }.sort
      moved = pairs.count { |(_, _, a), (_, _, b)| a != b }
      moved_process = pairs.count { |(_, _, a), (_, _, b)| a.split(".").first != b.split(".").first }
      per_worker = spans.group_by { |s| s[2] }.transform_values(&:size)
      per_process = spans.group_by { |s| s[2].split(".").first }.transform_values(&:size)
      { sections: count / wall, commands: deltas[0].fdiv(count), cpu_us: 1e6 * deltas[1] / count,
        p50_ms: 1000 * Bench.percentile(gaps, 0.5), p99_ms: 1000 * Bench.percentile(gaps, 0.99),
        moved: moved.fdiv([pairs.size, 1].max), moved_process: moved_process.fdiv([pairs.size, 1].max),
        busiest: per_worker.values.max.fdiv(count), busiest_process: per_process.values.max.fdiv(count),
        longest_run: longest_run(spans), **waited(spans), **waits(spans) }
    end

    # How long workers waited for the lock, from asking to entering (ms): p50, p99 and the most,
    # over all sections but each worker's first (which also connects and loads scripts).
    def waits(spans)
      return {} if spans.any? { |s| s[3].nil? }

      later = spans.group_by { |s| s[2] }.values.flat_map { |mine| mine.sort_by(&:first).drop(1) }
      return {} if later.empty?

      ms = later.map { |entered, _, _, asked| 1000 * (entered - asked) }.sort
      { wait_p50_ms: Bench.percentile(ms, 0.5), wait_p99_ms: Bench.percentile(ms, 0.99), wait_max_ms: ms.last }
    end

    # The most sections one process ran in a row while every process was still running (the
    # cross-process bound of a cohort hand-off: local passes + 1).
    def longest_run(spans)
      by_entry = spans.sort_by(&:first)
      process = ->(span) { span[2].split(".").first }
      all_running_until = by_entry.group_by(&process).values.map { |mine| mine.last.first }.min
      by_entry.take_while { |s| s.first <= all_running_until }.chunk_while { |a, b| process.call(a) == process.call(b) }
              .map(&:size).max
    end

    # How many sections others entered while a worker waited (from asking to entering): the
    # most, and the 99th percentile, over all sections but each worker's first (which also
    # connects, loads scripts and starts its process's inbox while the others run). None when
    # the spans carry no `asked`.
    def waited(spans)
      return {} if spans.any? { |s| s[3].nil? }

      entries = spans.map(&:first).sort
      later = spans.group_by { |s| s[2] }.values.flat_map { |mine| mine.sort_by(&:first).drop(1) }
      counts = later.map do |entered, _, _, asked|
        first_after_ask = entries.bsearch_index { |e| e > asked } || entries.size
        entries.bsearch_index { |e| e >= entered } - first_after_ask
      end.sort
      { waited_max: counts.last, waited_p99: Bench.percentile(counts, 0.99) }
    end

    # [release, the entry it let in] pairs: the k-th span to leave and the (k + slots)-th to enter
    # (all slots busy throughout, which is what these runs keep them).
    def handoffs(spans, slots)
      leaving = spans.sort_by { |s| s[1] }
      entering = spans.sort_by(&:first).drop(slots)
      leaving.take(entering.size).zip(entering)
    end

    # One Markdown table: a row per measure, a column per (implementation, config); `title` is
    # the unit ("section", "block").
    def table(title, results)
      heads = results.map { |(impl, (workers, processes)), _| "#{impl}, #{workers}/#{processes}" }
      rows = [["#{title}s per second", :sections, "%<v>s"], ["Redis commands per #{title}", :commands, "%<v>.1f"],
              ["Redis CPU per #{title} (µs)", :cpu_us, "%<v>.0f"], ["hand-off p50 (ms)", :p50_ms, "%<v>.3f"],
              ["hand-off p99 (ms)", :p99_ms, "%<v>.3f"], ["hand-offs to another worker", :moved, "%<v>s"],
              ["busiest worker's share", :busiest, "%<v>s"], ["busiest process's share", :busiest_process, "%<v>s"],
              ["most #{title}s of one process in a row", :longest_run, "%<v>d"],
              ["#{title}s entered by others while one waited, p99", :waited_p99, "%<v>d"],
              ["#{title}s entered by others while one waited, most", :waited_max, "%<v>d"]]
      lines = ["| contended, workers/processes | #{heads.join(" | ")} |", "|---|#{"---:|" * heads.size}"]
      rows.each do |label, key, fmt|
        next if results.all? { |_, r| r[key].nil? }

        cells = results.map { |_, r| cell(key, r[key], fmt) }
        lines << "| #{label} | #{cells.join(" | ")} |"
      end
      lines.join("\n")
    end

    def cell(key, value, fmt)
      return "—" if value.nil?

      case key
      when :sections then Bench.number(value)
      # Two decimals: a fair run sits at the floor (1/8 = 12.50 %, 1/32 = 3.13 %) and one decimal
      # rounds a few sections either way.
      when :busiest then format("%.2f %%", 100 * value)
      when :moved, :moved_process, :busiest_process then format("%.1f %%", 100 * value)
      else format(fmt, v: value)
      end
    end
  end
end
