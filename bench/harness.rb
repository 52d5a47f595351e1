# frozen_string_literal: true

require "etc"
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
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
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
        lines << format("| %s | %s | %s | %.2fx |", row.case_name, number(row.ours), number(row.baseline), row.ratio)
      end
      lines.join("\n")
    end

    private

    def number(value)
      value.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    end
  end
end
