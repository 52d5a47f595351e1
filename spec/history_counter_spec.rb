# frozen_string_literal: true

require_relative "support/history_on"

# History::Counter and Counters: a DistMutex's and a ConcurrentLimiter's :acquired and :released
# counted by the Rust core in the Counter's Native::Tally when History alone listens (no payload, no
# Ruby per event), drained by the flush as the minute of the drain before, at most Counters::MAX at once.
RSpec.describe Ferrolock::History::Counter, time_limit: 60 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }
  let(:minute) { 1_764_000_000 - (1_764_000_000 % 60) }
  let(:native) do
    Ferrolock::Native::DistMutex.new(Ferrolock.client.native, "counter:native", nil, true, 30.0, 0, 0, true, true)
  end

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

  # One lock and unlock of the native mutex, counted in tally.
  def native_cycle(tally)
    native.unlock(native.lock(nil, tally), tally)
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

  it "counts the same fields through Ferrolock.instrument when someone subscribed, never twice" do
    subscription = Ferrolock.subscribe(:acquired) { nil }
    mutex = Ferrolock::DistMutex.new("counter:both")
    2.times { mutex.synchronize { nil } }
    Ferrolock.unsubscribe(subscription)
    mutex.synchronize { nil }
    Ferrolock::History.flush!
    expect(counts_of("counter:both", "dist_mutex")).to eq("acquired" => 3, "released" => 3)
    expect(admin.stats("counter:both", since: 60)[:primitives]["dist_mutex"][:waits][:samples]).to eq(3)
  end

  it "counts beyond Counters::MAX in its primitive's (other) Counter" do
    Ferrolock::DistMutex.new("counter:max:first").synchronize { nil } # the flush thread runs, with its Counters
    counters = Ferrolock::History.instance_variable_get(:@counters)
    stub_const("Ferrolock::History::Counters::MAX", counters.size + 2) # (earlier examples' stay for a minute)
    mutexes = Array.new(4) { |i| Ferrolock::DistMutex.new("counter:max:#{i}") }
    2.times { mutexes.each { |mutex| mutex.synchronize { nil } } }
    expect(counters.size).to eq(Ferrolock::History::Counters::MAX + 1) # and the (other) Counter
    Ferrolock::History.flush!
    2.times { |i| expect(counts_of("counter:max:#{i}", "dist_mutex")).to eq("acquired" => 2, "released" => 2) }
    2.times { |i| expect(counts_of("counter:max:#{i + 2}", "dist_mutex")).to be_nil }
    expect(counts_of("(other)", "dist_mutex")).to eq("acquired" => 4, "released" => 4)
  end

  it "drains its tally into the minute it is given, and leaves after an idle minute" do
    counters = Ferrolock::History::Counters.new
    counter = described_class.new(:dist_mutex, "n")
    tally = counters.enter(counter, Thread.current)
    2.times { native_cycle(tally) }
    collected = counters.collect({}, minute)
    expect(collected.slice([minute, "dist_mutex|acquired|n"], [minute, "dist_mutex|released|n"]))
      .to eq([minute, "dist_mutex|acquired|n"] => 2, [minute, "dist_mutex|released|n"] => 2)
    steps = collected.select { |(_, field), _| field.match?(/\|[wh]\d+\|/) }
    expect(steps.values.sum).to eq(4) # a wait and a hold each
    expect(counters.collect({}, minute)).to eq({})
    native_cycle(tally) # counted after a drain: the next minute's
    expect(counters.collect({}, minute + 60)[[minute + 60, "dist_mutex|acquired|n"]]).to eq(1)
    expect(counters.collect({}, minute + 120)).to eq({})
    expect(counters.size).to eq(1) # counted in the minute before
    expect(counters.collect({}, minute + 180)).to eq({})
    expect(counters.size).to eq(0)
    expect(counter.tally).to be_nil.or(be_a(Ferrolock::Native::Tally)) # asks History's Counters again
  end

  it "writes the counts of a drain as the minute of the drain before (the flush thread drains at each minute's end)" do
    mutex = Ferrolock::DistMutex.new("counter:minute")
    2.times { mutex.synchronize { nil } }
    now = Process.clock_gettime(Process::CLOCK_REALTIME, :second)
    before = now - (now % 60) - 60
    Ferrolock::History.instance_variable_set(:@drained_at, before + 59) # the last drain: the minute before's end
    Ferrolock::History.flush!
    drained = Ferrolock::History.instance_variable_get(:@drained_at)
    mutex.synchronize { nil }
    Ferrolock::History.flush!
    minutes = redis.keys("ferrolock:{history}:m:*").to_h do |key|
      [Integer(key.split(":").last), redis.hget(key, "dist_mutex|acquired|counter:minute")]
    end
    expect(minutes.compact).to eq(before => "2", drained - (drained % 60) => "1")
    # Never past a minute's end: the flush thread wakes just after it.
    left = 60 - (Process.clock_gettime(Process::CLOCK_REALTIME) % 60)
    expect(Ferrolock::History.send(:pause)).to be <= left + 0.05
  end
end
