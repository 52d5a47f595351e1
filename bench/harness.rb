# frozen_string_literal: true

require "etc"
require "json"
require_relative "../demo/throwaway_redis"

# Helpers shared by the benchmarks in bench/: a throwaway Redis, a timer for
# N operations spread over T threads, and Markdown tables with ratios.
module Bench
  Row = Struct.new(:case_name, :ours, :baseline) do
    def ratio
      ours / baseline
    end
  end

  @benchmarks = {}

  class << self
    attr_reader :benchmarks
    attr_accessor :redis_url

    # Bench.define("round_trip") { |bench| ... } in bench/<name>.rb.
    def define(name, &block)
      @benchmarks[name.to_s] = block
    end

    # Runs the block ops times in total, split over threads threads (each
    # thread gets its own state from setup, e.g. a connection); returns ops/s.
    def ops_per_second(ops:, threads: 1, setup: -> {}, warmup: [ops / 10, 100].max, &operation)
      states = Array.new(threads) { setup.call }
      per_thread = ops / threads
      run_threads(states, [warmup / threads, 1].max, &operation)
      started = monotonic
      run_threads(states, per_thread, &operation)
      (per_thread * threads) / (monotonic - started)
    end

    def monotonic
      Ferrolock.monotonic
    end

    # Runs `threads` threads here and as many in a forked child, each calling the block
    # `per_thread` times; returns everything the calls returned (JSON-able) and the wall time.
    # CLOCK_MONOTONIC is system-wide, so times taken in the two processes compare.
    def in_two_processes(threads:, per_thread:, &block)
      read, write = IO.pipe
      pid = fork do
        read.close
        write.write(JSON.dump(run_calls(threads, per_thread, &block)))
        exit!(0)
      end
      write.close
      started = monotonic
      results = run_calls(threads, per_thread, &block) + JSON.parse(read.read)
      Process.wait(pid)
      [results, monotonic - started]
    end

    # Commands clients sent, by name, from INFO commandstats (which counts commands run inside
    # scripts too, so count the client-sent names only). redis-rb parses it into
    # { "evalsha" => { "calls" => "12", ... }, ... }.
    def commands_sent(redis, names)
      stats = redis.info("commandstats")
      names.sum { |name| stats.dig(name, "calls").to_i }
    end

    def percentile(sorted, pct)
      sorted[((sorted.size - 1) * pct).round]
    end

    def median(values)
      sorted = values.sort
      mid = sorted.size / 2
      sorted.size.odd? ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2.0
    end

    # 12345.6 -> "12,346"
    def number(value)
      value.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    end

    def machine
      cores = Etc.nprocessors
      "#{RUBY_DESCRIPTION.split(" [").first}, #{cores} cores, #{memory_gib} GiB"
    end

    def memory_gib
      File.read("/proc/meminfo")[/MemTotal:\s+(\d+)/, 1].to_i.fdiv(1024 * 1024).round
    rescue SystemCallError
      0
    end

    private

    def run_calls(threads, per_thread, &block)
      Array.new(threads) { Thread.new { Array.new(per_thread) { block.call } } }.flat_map(&:value)
    end

    def run_threads(states, count, &block)
      states.map { |state| Thread.new { count.times { block.call(state) } } }.each(&:join)
    end
  end

  # Collects rows and prints them as a Markdown table.
  class Table
    def initialize(title, ours: "ferrolock", baseline: "redis-rb")
      @title = title
      @ours = ours
      @baseline = baseline
      @rows = []
    end

    def add(case_name, ours:, baseline:)
      @rows << Row.new(case_name, ours, baseline)
      self
    end

    def to_s
      header = "| #{@title} | #{@ours} (ops/s) | #{@baseline} (ops/s) | ratio |"
      lines = [header, "|---|---:|---:|---:|"]
      @rows.each do |row|
        lines << format("| %s | %s | %s | %.2fx |", row.case_name, Bench.number(row.ours), Bench.number(row.baseline),
                        row.ratio)
      end
      lines.join("\n")
    end
  end
end
