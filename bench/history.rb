# frozen_string_literal: true

require_relative "support/pinning"

# What Ferrolock::History costs on the hot path (issue 41: within 3 % of history off): an uncontended
# DistMutex lock+unlock and ConcurrentLimiter#within_limit, with history on and off in one process on
# one Redis, pinned as `bin/bench peers` pins (redis-server on one CPU, this process on the others;
# undone at the end). ROUNDS rounds; in each, every case runs on and off back to back, the order
# alternating from round to round, so a burst of load from elsewhere mostly hits both: the figure is
# the median of the rounds' on/off ratios (best rates beside it). Then the per-event costs
# (thread CPU): Ferrolock.instrument with a payload, and the History::Counter a DistMutex counts in
# when History is its only listener. The flush thread writes every FLUSH_EVERY seconds meanwhile.
module HistoryBench
  ROUNDS = 20
  OPS = 3_000
  EVENTS = 200_000
  CASES = { mutex: "DistMutex lock+unlock", limiter: "ConcurrentLimiter(10) within_limit" }.freeze

  module_function

  def history(enabled)
    Ferrolock.configure { |c| c.history = enabled }
  end

  # { case => { true => [cycles/s per round], false => [...] } }
  def rounds(cases)
    rates = cases.transform_values { { true => [], false => [] } }
    ROUNDS.times do |round|
      cases.each do |name, op|
        (round.even? ? [true, false] : [false, true]).each do |enabled|
          history(enabled)
          rates[name][enabled] << Bench.ops_per_second(ops: OPS, &op)
        end
      end
    end
    rates
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

  def row(label, with, without)
    ratios = with.zip(without).map { |a, b| a / b }.sort
    format("| %<label>s | %<on>s | %<off>s | %<best>.3f | %<median>.3f (%<low>.3f–%<high>.3f) |",
           label: label, on: Bench.number(with.max), off: Bench.number(without.max), best: with.max / without.max,
           median: Bench.median(ratios), low: Bench.percentile(ratios, 0.25), high: Bench.percentile(ratios, 0.75))
  end

  def load
    File.read("/proc/loadavg").split.first(3).join(" ")
  end

  def table(rates)
    lines = ["| uncontended, 1 thread (#{ROUNDS} alternating rounds of #{OPS}) | history on, best cycles/s | " \
             "off, best | on/off, best | on/off per round, median (quartiles) |", "|---|---:|---:|---:|---:|"]
    CASES.each { |name, label| lines << row(label, rates[name][true], rates[name][false]) }
    lines
  end

  def per_event
    payload = { primitive: :dist_mutex, name: "bench:history", waited: 0.0001 }
    counter = Ferrolock::History::Counter.new(:dist_mutex, "bench:history")
    on, off = [true, false].map { |enabled| ns_per_event(enabled) { Ferrolock.instrument(:acquired, payload) } }
    counted = ns_per_event(true) { counter.acquired(0.0001) { payload } }
    format("Per event (thread CPU, best of 3): Ferrolock.instrument(:acquired, payload) %<on>.0f ns with " \
           "history on, %<off>.0f ns off; History::Counter#acquired (what a DistMutex or ConcurrentLimiter " \
           "does when History alone listens) %<counted>.0f ns", on: on, off: off, counted: counted)
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
  rates = HistoryBench.rounds(mutex: proc { mutex.synchronize { nil } }, limiter: proc { limiter.within_limit { nil } })
  [pinning, "load average #{before} before, #{HistoryBench.load} after (#{cpus} CPUs)", "",
   *HistoryBench.table(rates), "", HistoryBench.per_event].join("\n")
ensure
  Bench::Pinning.stop(Bench.redis_url)
  Ferrolock.configure do |c|
    c.history = was
    c.read_timeout = timeout
  end
end
