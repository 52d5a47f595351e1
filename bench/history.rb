# frozen_string_literal: true

# What Ferrolock::History costs on the hot path: uncontended DistMutex lock+unlock and
# ConcurrentLimiter#within_limit with history on and off, alternating in one process on one Redis
# (ROUNDS rounds): cycles/s (best, and the median of each round's on/off ratio: a round's two runs
# are back to back, so a burst of load from elsewhere mostly hits both), and the process's CPU µs per cycle, its native
# threads' too (less sensitive to a busy machine than wall time). Then Ferrolock.instrument alone,
# ns per event: the in-memory count that history adds to every event. The flush thread writes every
# FLUSH_EVERY seconds meanwhile.
module HistoryBench
  ROUNDS = 12
  OPS = 4_000
  EVENTS = 200_000
  CASES = { mutex: "DistMutex lock+unlock", limiter: "ConcurrentLimiter within_limit" }.freeze

  module_function

  def cpu
    Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  end

  # { case => [cycles/s, CPU µs per cycle] } with history on or off.
  def run(history, cases)
    Ferrolock.configure { |c| c.history = history }
    cases.transform_values do |op|
      started = cpu
      rate = Bench.ops_per_second(ops: OPS, &op)
      [rate, (cpu - started) * 1e6 / (OPS * 1.1)] # with ops_per_second's OPS / 10 warm-up
    end
  ensure
    Ferrolock::History.flush!
  end

  def instrument_ns(history)
    Ferrolock.configure { |c| c.history = history }
    payload = { primitive: :dist_mutex, name: "bench:history", waited: 0.0001 }
    started = cpu
    EVENTS.times { Ferrolock.instrument(:acquired, payload) }
    (cpu - started) * 1e9 / EVENTS
  ensure
    Ferrolock::History.flush!
  end

  def row(label, with, without)
    rate = ->(list) { list.map(&:first) }
    usec = ->(list) { Bench.median(list.map(&:last)) }
    best_with = rate.call(with).max
    best_without = rate.call(without).max
    paired = rate.call(with).zip(rate.call(without)).map { |on, off| on / off }
    format("| %<label>s | %<on>s | %<off>s | %<ratio>.3f | %<median>.3f | %<cpu_on>.1f | %<cpu_off>.1f |",
           label: label, on: Bench.number(best_with), off: Bench.number(best_without),
           ratio: best_with / best_without, median: Bench.median(paired),
           cpu_on: usec.call(with), cpu_off: usec.call(without))
  end
end

Bench.define("history") do
  mutex = Ferrolock::DistMutex.new("bench:history")
  limiter = Ferrolock::ConcurrentLimiter.new("bench:history-limiter", 10)
  cases = { mutex: proc { mutex.synchronize { nil } }, limiter: proc { limiter.within_limit { nil } } }
  rounds = Array.new(HistoryBench::ROUNDS) { [true, false].map { |history| HistoryBench.run(history, cases) } }
  lines = ["| uncontended, 1 thread (#{HistoryBench::ROUNDS} alternating rounds) | history on, best cycles/s | " \
           "off, best | on/off best | on/off per round, median | CPU µs/cycle on | off |",
           "|---|---:|---:|---:|---:|---:|---:|"]
  HistoryBench::CASES.each do |name, label|
    lines << HistoryBench.row(label, rounds.map { |on, _| on[name] }, rounds.map { |_, off| off[name] })
  end
  on, off = [true, false].map { |history| Array.new(3) { HistoryBench.instrument_ns(history) }.min }
  lines << "" << format("Ferrolock.instrument(:acquired, payload): %<on>.0f ns per event with history on, " \
                        "%<off>.0f ns off (best of 3, CPU time)", on: on, off: off)
  Ferrolock.configure { |c| c.history = true }
  lines.join("\n")
end
