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

    module_function

    # `setup.call` builds a worker's state in its own thread; `section.call(state)` enters,
    # returns [entered, left] (Bench.monotonic, system-wide), and has left when it returns.
    # `handoffs: false` (a semaphore, where sections overlap): no hand-off latency.
    def measure(workers:, processes:, seconds:, setup:, section:, handoffs: true)
      stats = Redis.new(url: Bench.redis_url)
      before = redis_counters(stats)
      started = Bench.monotonic
      spans = in_processes(processes, workers / processes, started + seconds, setup, section)
      after = redis_counters(stats)
      summarize(spans, after.zip(before).map { |a, b| a - b }, handoffs)
    end

    # [commands run (excluding the INFO calls measuring them), Redis CPU seconds].
    def redis_counters(redis)
      commands = redis.info("commandstats").sum { |name, stat| name == "info" ? 0 : stat["calls"].to_i }
      cpu = redis.info("cpu")
      [commands, cpu["used_cpu_sys"].to_f + cpu["used_cpu_user"].to_f]
    end

    def in_processes(processes, threads, stop_at, setup, section)
      children = Array.new(processes) do |p|
        read, write = IO.pipe
        pid = fork do
          read.close
          write.write(JSON.dump(run_workers(p, threads, stop_at, setup, section)))
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

    # Each span: [entered, left, worker id].
    def run_workers(process, threads, stop_at, setup, section)
      Array.new(threads) do |t|
        Thread.new do
          state = setup.call
          spans = []
          while Bench.monotonic < stop_at
            entered, left = section.call(state)
            spans << [entered, left, "#{process}.#{t}"]
          end
          spans
        end
      end.flat_map(&:value)
    end

    def summarize(spans, deltas, handoffs)
      spans = spans.sort_by(&:first)
      count = spans.size
      wall = spans.last[1] - spans.first[0]
      pairs = spans.each_cons(2)
      gaps = handoffs ? pairs.map { |(_, left, _), (entered, _, _)| entered - left }.sort : nil
      moved = pairs.count { |(_, _, a), (_, _, b)| a != b }
      per_worker = spans.group_by(&:last).transform_values(&:size)
      { sections: count / wall, commands: deltas[0].fdiv(count), cpu_us: 1e6 * deltas[1] / count,
        p50_ms: gaps && (1000 * Bench.percentile(gaps, 0.5)), p99_ms: gaps && (1000 * Bench.percentile(gaps, 0.99)),
        moved: moved.fdiv([count - 1, 1].max), busiest: per_worker.values.max.fdiv(count) }
    end

    # One Markdown table: a row per measure, a column per (implementation, config); `title` is
    # the unit ("section", "block").
    def table(title, results)
      heads = results.map { |(impl, (workers, processes)), _| "#{impl}, #{workers}/#{processes}" }
      rows = [["#{title}s per second", :sections, "%<v>s"], ["Redis commands per #{title}", :commands, "%<v>.1f"],
              ["Redis CPU per #{title} (µs)", :cpu_us, "%<v>.0f"], ["hand-off p50 (ms)", :p50_ms, "%<v>.3f"],
              ["hand-off p99 (ms)", :p99_ms, "%<v>.3f"], ["hand-offs to another worker", :moved, "%<v>s"],
              ["busiest worker's share", :busiest, "%<v>s"]]
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
      when :moved, :busiest then format("%.1f %%", 100 * value)
      else format(fmt, v: value)
      end
    end
  end
end
