# frozen_string_literal: true

require_relative "support/pinning"

# What Ferrolock::History costs on the hot path (issue 41: within 3 % of history off): an uncontended
# DistMutex lock+unlock and ConcurrentLimiter#within_limit, with history on and off in one process on
# one Redis, pinned as `bin/bench peers` pins (redis-server on one CPU, this process on the others;
# undone at the end). The finest alternation: history is switched on or off before each cycle (outside
# its timing), CYCLES cycles each side, so load from elsewhere hits both sides alike (an A/A run of this,
# FERROLOCK_HISTORY_AA=1, reads 0.996-1.002 on a loaded machine); the figures are the on/off rate
# ratios of the median cycle and of the mean of the middle 80 %. Then the per-event costs
# (thread CPU): Ferrolock.instrument with a payload, and History::Counter#tally, the Ruby a DistMutex
# or ConcurrentLimiter runs per event when History is its only listener (the Rust core then times the
# wait or hold and counts it in atomics, inside the native call it makes anyway). The flush thread
# writes every FLUSH_EVERY seconds meanwhile.
module HistoryBench
  CYCLES = 20_000
  EVENTS = 200_000
  CASES = { mutex: "DistMutex lock+unlock", limiter: "ConcurrentLimiter(10) within_limit" }.freeze
  # History on or off for cycle i: on, off, off, on, on, off ... (neither side always follows the other).
  ORDER = ->(i) { (i + (i / 2)).even? }
  # FERROLOCK_HISTORY_AA=1: history on for both sides (an A/A run: what the method reads with no difference).
  AA = ENV["FERROLOCK_HISTORY_AA"] == "1"

  module_function

  def history(enabled)
    Ferrolock.configure { |c| c.history = enabled }
  end

  # { case => { true => [seconds per cycle], false => [...] } }, CYCLES per side, each timed alone.
  def cycles(cases)
    cases.each_value { |op| 1_000.times(&op) } # scripts loaded, connections made
    times = cases.transform_values { { true => [], false => [] } }
    (2 * CYCLES).times do |i|
      on = ORDER.call(i)
      Ferrolock::History.apply(AA || on) # what Ferrolock.configure { |c| c.history = on } calls, without the rest
      cases.each do |name, op|
        started = Bench.monotonic
        op.call
        times[name][on] << (Bench.monotonic - started)
      end
    end
    times
  ensure
    Ferrolock::History.flush!
  end

  def thread_cpu
    Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  end

  # Thread CPU ns per call of the block, best of 3.
  def ns_per_event(enabled, &block)
    history(enabled)
    Array.new(3) do
      started = thread_cpu
      EVENTS.times(&block)
      (thread_cpu - started) * 1e9 / EVENTS
    end.min
  ensure
    Ferrolock::History.flush!
  end

  # The median cycle and the mean of the middle 80 % per side; the rate ratios on/off of both.
  def row(label, with, without)
    on, off = [with, without].map(&:sort)
    trimmed = ->(list) { list[(list.size / 10)...(list.size - (list.size / 10))].then { |mid| mid.sum / mid.size } }
    format("| %<label>s | %<on>.1f | %<off>.1f | %<median>.3f | %<on_mean>.1f | %<off_mean>.1f | %<mean>.3f |",
           label: label, on: Bench.median(on) * 1e6, off: Bench.median(off) * 1e6,
           median: Bench.median(off) / Bench.median(on), on_mean: trimmed.call(on) * 1e6,
           off_mean: trimmed.call(off) * 1e6, mean: trimmed.call(off) / trimmed.call(on))
  end

  def load
    File.read("/proc/loadavg").split.first(3).join(" ")
  end

  def table(times)
    lines = ["| uncontended, 1 thread (#{CYCLES} cycles each side, interleaved) | history on, median µs | " \
             "off | on/off rate by median | on, mean of middle 80 % µs | off | on/off rate by it |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    CASES.each { |name, label| lines << row(label, times[name][true], times[name][false]) }
    lines
  end

  def per_event
    payload = { primitive: :dist_mutex, name: "bench:history", waited: 0.0001 }
    counter = Ferrolock::History::Counter.new(:dist_mutex, "bench:history")
    on, off = [true, false].map { |enabled| ns_per_event(enabled) { Ferrolock.instrument(:acquired, payload) } }
    counted = ns_per_event(true) { counter.tally }
    format("Per event (thread CPU, best of 3): Ferrolock.instrument(:acquired, payload) %<on>.0f ns with " \
           "history on, %<off>.0f ns off; History::Counter#tally (the Ruby a DistMutex or ConcurrentLimiter " \
           "runs when History alone listens; the core times and counts the event) %<counted>.0f ns",
           on: on, off: off, counted: counted)
  end
end

Bench.define("history") do
  was = Ferrolock::History.enabled?
  timeout = Ferrolock.config.read_timeout
  cpus = Etc.nprocessors
  # A reply late by more than a second on a loaded machine is slow, not a failure, here.
  Ferrolock.configure { |c| c.read_timeout = 10 }
  pinning = Bench::Pinning.start
  Bench::Pinning.server(Bench.redis_url)
  mutex = Ferrolock::DistMutex.new("bench:history")
  limiter = Ferrolock::ConcurrentLimiter.new("bench:history-limiter", 10)
  before = HistoryBench.load
  times = HistoryBench.cycles(mutex: proc { mutex.synchronize { nil } }, limiter: proc { limiter.within_limit { nil } })
  aa = HistoryBench::AA ? ["A/A run (FERROLOCK_HISTORY_AA=1): history on for both sides"] : []
  [pinning, *aa, "load average #{before} before, #{HistoryBench.load} after (#{cpus} CPUs)", "",
   *HistoryBench.table(times), "", HistoryBench.per_event].join("\n")
ensure
  Bench::Pinning.stop(Bench.redis_url)
  Ferrolock.configure do |c|
    c.history = was
    c.read_timeout = timeout
  end
end
