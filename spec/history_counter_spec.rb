# frozen_string_literal: true

require_relative "support/history_on"

# History::Counter and Counters: a DistMutex's and a ConcurrentLimiter's :acquired and :released
# counted with no payload built when History alone listens, per minute, read by the flush as what
# grew since the last one, at most Counters::MAX at once.
RSpec.describe Ferrolock::History::Counter, time_limit: 60 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }
  let(:minute) { 1_764_000_000 - (1_764_000_000 % 60) }
  let(:slots) { described_class }
  let(:ends) { Ferrolock.monotonic + 60 } # (Counters' own minutes: nothing counts through History here)

  include_context "with history on"

  def counts_of(name, primitive)
    admin.stats(name, since: 60)[:primitives].dig(primitive, :counts)
  end

  # The fewest objects allocated per cycle over 5 windows of 10 cycles. GC.stat counts every thread's
  # allocations: a window in which the flush thread (or another of the process's threads) allocated
  # reads high, so the least one is the cycle's own; a payload per event would be in every window.
  def allocations_per_cycle(cycle)
    cycle.call # warm: scripts loaded, the Counter entered
    Array.new(5) do
      before = GC.stat(:total_allocated_objects)
      10.times { cycle.call }
      (GC.stat(:total_allocated_objects) - before) / 10.0
    end.min
  end

  it "builds no payload for the events History alone counts: a cycle allocates what it does with history off" do
    mutex = Ferrolock::DistMutex.new("counter:alloc")
    limiter = Ferrolock::ConcurrentLimiter.new("counter:alloc", 2)
    { mutex => -> { mutex.synchronize { nil } }, limiter => -> { limiter.within_limit { nil } } }.each do |_, cycle|
      on = allocations_per_cycle(cycle)
      Ferrolock.configure { |c| c.history = false }
      off = allocations_per_cycle(cycle)
      Ferrolock.configure { |c| c.history = true }
      # A payload per event would be two objects a cycle more; the flush thread may allocate meanwhile.
      expect(on).to be < off + 0.5
    end
    Ferrolock::History.flush!
    # The cycles with history on only.
    expect(counts_of("counter:alloc", "dist_mutex")).to eq("acquired" => 51, "released" => 51)
    expect(counts_of("counter:alloc", "concurrent_limiter")).to eq("acquired" => 51, "released" => 51)
  end

  it "counts the same fields through Ferrolock.instrument when someone subscribed" do
    subscription = Ferrolock.subscribe(:acquired) { nil }
    mutex = Ferrolock::DistMutex.new("counter:both")
    2.times { mutex.synchronize { nil } }
    Ferrolock.unsubscribe(subscription)
    mutex.synchronize { nil }
    Ferrolock::History.flush!
    expect(counts_of("counter:both", "dist_mutex")).to eq("acquired" => 3, "released" => 3)
    expect(admin.stats("counter:both", since: 60)[:primitives]["dist_mutex"][:waits][:samples]).to eq(3)
  end

  it "counts through History.record beyond Counters::MAX, by name while the Tally has room" do
    Ferrolock::DistMutex.new("counter:max:first").synchronize { nil } # the flush thread runs, with its Counters
    counters = Ferrolock::History.instance_variable_get(:@counters)
    stub_const("Ferrolock::History::Counters::MAX", counters.size + 2) # (earlier examples' stay for a minute)
    mutexes = Array.new(4) { |i| Ferrolock::DistMutex.new("counter:max:#{i}") }
    2.times { mutexes.each { |mutex| mutex.synchronize { nil } } }
    expect(counters.size).to eq(Ferrolock::History::Counters::MAX)
    Ferrolock::History.flush!
    4.times { |i| expect(counts_of("counter:max:#{i}", "dist_mutex")).to eq("acquired" => 2, "released" => 2) }
  end

  it "keeps at most Counters::MAX objects plus Tally::MAX_NAMES names per flush, the rest under (other)" do
    Ferrolock::DistMutex.new("counter:bound:first").synchronize { nil } # the flush thread runs, with its Counters
    counters = Ferrolock::History.instance_variable_get(:@counters)
    stub_const("Ferrolock::History::Counters::MAX", counters.size + 2) # (earlier examples' stay for a minute)
    stub_const("Ferrolock::History::Tally::MAX_NAMES", 2)
    Ferrolock::History.flush! # the Tally starts empty
    6.times { |i| Ferrolock::DistMutex.new("counter:bound:#{i}").synchronize { nil } }
    3.times { |i| Ferrolock.instrument(:blocked, primitive: :concurrent_limiter, name: "counter:bound:limiter-#{i}") }
    Ferrolock::History.flush!
    names = redis.keys("ferrolock:{history}:m:*").flat_map { |key| redis.hkeys(key) }
                 .map { |field| Ferrolock::History::Buckets.parse(field).last }.grep(/\Acounter:bound:\d/).uniq
    expect(names.size).to eq(4) # 2 Counters, then 2 names in the Tally
    expect(counts_of("(other)", "dist_mutex")).to eq("acquired" => 2, "released" => 2)
    expect(counts_of("(other)", "concurrent_limiter")).to eq("blocked" => 3)
  end

  it "keeps a minute's counts until flushed when it moves on (a late count too), and leaves after an idle minute" do
    counters = Ferrolock::History::Counters.new
    counter = described_class.new(:dist_mutex, "n")
    counts = counters.enter(counter, minute, ends, Thread.current)
    2.times { counts[slots::ACQUIRED] += 1 }
    expect(counters.collect({}, minute)).to eq([minute, "dist_mutex|acquired|n"] => 2)
    expect(counters.collect({}, minute)).to eq({})
    later = counters.enter(counter, minute + 60, ends, Thread.current)
    counts[slots::ACQUIRED] += 1 # read the clock in the minute before, counted after the move
    later[slots::HOLDS + 3] += 1
    expect(counters.collect({}, minute + 60))
      .to eq([minute, "dist_mutex|acquired|n"] => 1, [minute + 60, "dist_mutex|h3|n"] => 1)
    expect(counters.collect({}, minute + 120)).to eq({})
    expect(counters.size).to eq(1) # counted in the minute before
    expect(counters.collect({}, minute + 180)).to eq({})
    expect(counters.size).to eq(0)
    expect(counters.enter(counter, minute + 180, ends, Thread.current)).to eq(Array.new(slots::SIZE, 0))
  end

  it "counts in its minute until that minute's end, kept on the monotonic clock, then asks Counters again" do
    counter = described_class.new(:dist_mutex, "counter:ends")
    counter.acquired(:history, 0.0005, Ferrolock.monotonic) { raise "a payload built for History alone" }
    # Its minute's end, on the realtime clock: a minute's start (to the time between the two clock reads).
    at = Process.clock_gettime(Process::CLOCK_REALTIME) + (counter.instance_variable_get(:@ends) - Ferrolock.monotonic)
    expect([at % 60, 60 - (at % 60)].min).to be < 0.5
    # Its minute's end passed, as read on the monotonic clock: the next count asks Counters again.
    now = Process.clock_gettime(Process::CLOCK_REALTIME, :second)
    thread = Ferrolock::History.instance_variable_get(:@thread)
    Ferrolock::History.instance_variable_get(:@counters).enter(counter, now - (now % 60), Ferrolock.monotonic, thread)
    counter.released(:history, 0.0005, Ferrolock.monotonic) { raise "a payload built for History alone" }
    expect(counter.instance_variable_get(:@ends)).to be > Ferrolock.monotonic
    Ferrolock::History.flush!
    expect(counts_of("counter:ends", "dist_mutex")).to eq("acquired" => 1, "released" => 1)
  end
end
