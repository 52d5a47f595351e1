# frozen_string_literal: true

# Where Ferrolock::History's per-event cost goes: thread CPU ns per call of Ferrolock.instrument with
# history off and on, of History::Counter#tally (the Ruby a DistMutex or ConcurrentLimiter runs per
# event when History alone listens: the Rust core times and counts it), of History.record and
# Tally#add alone (every other event), and of the pieces they are made of
# (the clock read, the flush thread's check). ROUNDS rounds, each part measured once per round in
# turn (so a burst of load from elsewhere hits every part alike); the median round and the best,
# and the objects each call allocates (GC.stat; the payloads are made once, outside the loop).
# Thread CPU time: the flush thread and the other processes of a busy machine are not counted.
module HistoryPartsBench
  ROUNDS = 7
  CALLS = 200_000

  module_function

  def cpu
    Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  end

  # ns per call of the block, less empty (an empty lambda's call in the same loop).
  def ns(empty, &block)
    started = cpu
    CALLS.times(&block)
    ((cpu - started) * 1e9 / CALLS) - empty
  end

  def parts
    payload = { primitive: :dist_mutex, name: "bench:history", waited: 0.0001 }
    released = { primitive: :dist_mutex, name: "bench:history", held: 0.0002 }
    tally = Ferrolock::History::Tally.new
    counter = Ferrolock::History::Counter.new(:dist_mutex, "bench:history")
    thread = Thread.new { sleep }
    {
      "Ferrolock.instrument(:acquired), history off" => [false, -> { Ferrolock.instrument(:acquired, payload) }],
      "Ferrolock.instrument(:acquired), history on" => [true, -> { Ferrolock.instrument(:acquired, payload) }],
      "Ferrolock.instrument(:released, held:), history on" => [true, -> { Ferrolock.instrument(:released, released) }],
      "Ferrolock.listening?(:released), history off" => [false, -> { Ferrolock.listening?(:released) }],
      "History::Counter#tally, history on (History alone listens: the core counts in it)" =>
        [true, -> { counter.tally }],
      "Ferrolock.subscribed?(:acquired)" => [true, -> { Ferrolock.subscribed?(:acquired) }],
      "History.record" => [true, -> { Ferrolock::History.record(:acquired, payload) }],
      "Tally#add" => [true, -> { tally.add(:acquired, payload, 1_764_338_400) }],
      "Tally.take of 1 name (per flush)" => [true, lambda {
        tally.add(:acquired, payload, 1_764_338_400)
        tally.take
      }],
      "clock_gettime(REALTIME, :second)" => [true, -> { Process.clock_gettime(Process::CLOCK_REALTIME, :second) }],
      "Ferrolock.monotonic" => [true, -> { Ferrolock.monotonic }],
      "Native.fork_generation" => [true, -> { Ferrolock::Native.fork_generation }],
      "Thread#alive?" => [true, -> { thread.alive? }]
    }.tap { at_exit { thread.kill } }
  end

  def allocations(call)
    before = GC.stat(:total_allocated_objects)
    CALLS.times { call.call }
    (GC.stat(:total_allocated_objects) - before).fdiv(CALLS)
  end

  def table
    parts = self.parts
    nothing = -> {}
    rounds = Array.new(ROUNDS) do
      empty = ns(0) { nothing.call }
      parts.transform_values do |history, call|
        Ferrolock.configure { |c| c.history = history }
        ns(empty) { call.call }
      end
    end
    allocated = parts.transform_values do |history, call|
      Ferrolock.configure { |c| c.history = history }
      allocations(call)
    end
    Ferrolock::History.flush!
    lines = ["| part (#{ROUNDS} rounds of #{CALLS} calls, alternating) | ns per call, median round | best | " \
             "objects per call |", "|---|---:|---:|---:|"]
    parts.each_key do |label|
      values = rounds.map { |round| round[label] }
      lines << format("| %<label>s | %<median>.0f | %<best>.0f | %<objects>.2f |",
                      label: label, median: Bench.median(values), best: values.min, objects: allocated[label])
    end
    lines << "" << "(uptime: #{File.read("/proc/loadavg").split.first(3).join(" ")} on #{Etc.nprocessors} cores)"
    lines.join("\n")
  end
end

Bench.define("history_parts") do
  was = Ferrolock::History.enabled?
  HistoryPartsBench.table
ensure
  Ferrolock.configure { |c| c.history = was }
end
