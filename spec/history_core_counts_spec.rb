# frozen_string_literal: true

require_relative "support/history_on"

# Issue 41: with History alone listening, a DistMutex's and a ConcurrentLimiter's :acquired and
# :released are counted by the Rust core (History::Counter's Native::Tally), which times the waits
# and holds itself. Real cycles on a real Redis, many threads and a fork, read back exactly from the
# store: every event counted once, every wait and hold in one histogram step, each hold's step at
# least its block's sleep's and the waits no longer than what each thread measured around its call.
RSpec.describe "History: DistMutex and ConcurrentLimiter counted in the Rust core", time_limit: 90 do
  include_context "with history on"

  let(:hold) { 0.004 } # Buckets.wait_step(0.004) == 3: every hold's step is at least 3
  let(:threads) { 8 }
  let(:cycles) { 12 }
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:buckets) { Ferrolock::History::Buckets }

  # { counter => count } of primitive's name over every minute hash written.
  def fields_of(primitive, name)
    redis.keys("ferrolock:{history}:m:*").each_with_object(Hash.new(0)) do |key, out|
      redis.hgetall(key).each do |field, count|
        kind, counter, of = buckets.parse(field)
        out[counter] += Integer(count) if kind == primitive && of == name
      end
    end
  end

  # The steps of a histogram ("w" or "h") as a sorted list, one entry per sample.
  def samples(fields, prefix)
    fields.select { |counter, _| counter.start_with?(prefix) && counter.match?(/\A[wh]\d+\z/) }
          .flat_map { |counter, count| [Integer(counter[1..])] * count }.sort
  end

  # Runs threads x cycles of block, each returning [wait, hold] timed from outside the calls: the
  # longest the core's could be (it times inside them).
  def run_cycles(&block)
    outer = Queue.new
    Array.new(threads) do
      Thread.new do
        cycles.times { outer << block.call }
      end
    end.each(&:join)
    Array.new(outer.size) { outer.pop }
  end

  def expect_counted(primitive, name, outer)
    Ferrolock::History.flush!
    fields = fields_of(primitive, name)
    total = threads * cycles
    expect(fields.slice("acquired", "released")).to eq("acquired" => total, "released" => total)
    waits = samples(fields, "w")
    holds = samples(fields, "h")
    expect([waits.size, holds.size]).to eq([total, total])
    expect(holds.first).to be >= buckets.wait_step(hold)
    # Each sample's core time is inside its outer one: sorted, the core's steps are at most the outer's.
    outer_waits = outer.map { |wait, _| buckets.wait_step(wait) }.sort
    outer_holds = outer.map { |_, held| buckets.wait_step(held) }.sort
    expect(waits.zip(outer_waits).count { |core, out| core > out }).to eq(0)
    expect(holds.zip(outer_holds).count { |core, out| core > out }).to eq(0)
    expect(waits.uniq.size).to be > 1 # 8 threads on one lock: some waited whole holds
  end

  it "counts every DistMutex cycle of many threads once, with its wait's and hold's steps" do
    mutex = Ferrolock::DistMutex.new("core:mutex")
    outer = run_cycles do
      started = Ferrolock.monotonic
      mutex.lock
      granted = Ferrolock.monotonic
      sleep(hold)
      mutex.unlock
      [granted - started, Ferrolock.monotonic - started]
    end
    expect_counted("dist_mutex", "core:mutex", outer)
  end

  it "counts every ConcurrentLimiter cycle of many threads once, with its wait's and hold's steps" do
    limiter = Ferrolock::ConcurrentLimiter.new("core:limiter", 3, wait_timeout: 30)
    outer = run_cycles do
      started = Ferrolock.monotonic
      granted = nil
      limiter.within_limit do
        granted = Ferrolock.monotonic
        sleep(hold)
      end
      [granted - started, Ferrolock.monotonic - started]
    end
    expect_counted("concurrent_limiter", "core:limiter", outer)
  end

  it "counts DistMutex#sleep's release and the lock after it, and nothing for auto_release: false" do
    mutex = Ferrolock::DistMutex.new("core:sleep")
    mutex.synchronize { mutex.sleep(0.01) }
    Ferrolock::DistMutex.new("core:expiring", expire: 0.2, auto_release: false).synchronize { nil }
    Ferrolock::History.flush!
    expect(fields_of("dist_mutex", "core:sleep").slice("acquired", "released")).to eq("acquired" => 2, "released" => 2)
    expect(fields_of("dist_mutex", "core:expiring").slice("acquired", "released")).to eq("acquired" => 1)
  end

  it "lets a forked child write its own counts only, and the parent its own made before the fork" do
    mutex = Ferrolock::DistMutex.new("core:fork")
    limiter = Ferrolock::ConcurrentLimiter.new("core:fork", 2)
    3.times { mutex.synchronize { sleep(hold) } } # counted here, not flushed before the fork
    limiter.within_limit { nil }
    pid = fork do
      2.times { mutex.synchronize { nil } }
      Thread.new { limiter.within_limit { nil } }.join
      exit!(Ferrolock::History.flush! >= 2 ? 0 : 1) # its own counts, no at_exit flush
    end
    expect(Process.wait2(pid).last).to be_success
    Ferrolock::History.flush!
    mutex_fields = fields_of("dist_mutex", "core:fork")
    expect(mutex_fields.slice("acquired", "released")).to eq("acquired" => 5, "released" => 5)
    expect(samples(mutex_fields, "h").size).to eq(5)
    expect(samples(mutex_fields, "h").count { |step| step >= buckets.wait_step(hold) }).to be >= 3 # the parent's
    expect(fields_of("concurrent_limiter", "core:fork").slice("acquired", "released"))
      .to eq("acquired" => 2, "released" => 2)
  end

  # An interrupt queued just as a grant came back makes Interrupts give the hold back (nothing
  # recorded, the exception raised): the core counted its :acquired, so the give-back counts its
  # :released. A storm of Thread#raise over 4 threads' cycles until several such give-backs happened.
  it "counts a hold given back to an interrupt as released too: every :acquired has its :released" do
    injected = Class.new(StandardError)
    gave_back = 0
    allow(Ferrolock::Interrupts).to receive(:give_back_quietly).and_wrap_original do |original, *args|
      gave_back += 1
      original.call(*args)
    end
    mutex = Ferrolock::DistMutex.new("core:given-back", lease: 30)
    limiter = Ferrolock::ConcurrentLimiter.new("core:given-back", 2, wait_timeout: 30, lease: 30)
    stop = false
    # Made masked (a thread inherits its maker's mask), so no exception lands outside the rescue.
    workers = Thread.handle_interrupt(Object => :never) do
      Array.new(4) do |i|
        Thread.new do
          until stop && !Thread.pending_interrupt?
            interruptibly(injected) { i.even? ? mutex.synchronize { nil } : limiter.within_limit { nil } }
          end
        end
      end
    end
    deadline = Ferrolock.monotonic + 40
    until gave_back >= 6 || Ferrolock.monotonic > deadline
      workers.sample.raise(injected)
      sleep(rand * 0.0005)
    end
    stop = true
    workers.each(&:join)
    expect(gave_back).to be >= 1 # the path under test ran (6 expected within seconds)
    Ferrolock::History.flush!
    mutex_counts = fields_of("dist_mutex", "core:given-back").slice("acquired", "released")
    limiter_counts = fields_of("concurrent_limiter", "core:given-back").slice("acquired", "released")
    expect(mutex_counts["acquired"]).to be > 0
    expect(mutex_counts["released"]).to eq(mutex_counts["acquired"])
    expect(limiter_counts["released"]).to eq(limiter_counts["acquired"])
    # Nothing is left held, long before a lease (30 s) could end it: an acquisition cut short is
    # given back in the background, and when that give-back reached Redis before the cut-short
    # request itself (another connection), the grant made after it is given back too, within
    # about a second (seen in ci21: in_use 1 right after the storm, 0 half a second later).
    wait_until(timeout: 10, what: -> { "nothing held: #{[mutex.locked?, limiter.status[:in_use]]}" }) do
      [mutex.locked?, limiter.status[:in_use]] == [false, 0]
    end
  end
end
