# frozen_string_literal: true

require_relative "support/active_job_jobs"
require_relative "support/history_on"

# Hold times: every hold that ends sends :released with :held (seconds from the grant, monotonic),
# and History counts them as a histogram per name, read back by Admin#stats like waits. Holds here
# last at least HOLD seconds (a sleep inside the block), so :held is at least that on any machine.
RSpec.describe "History: hold times", time_limit: 60 do
  include FerrolockTest::ActiveJobJobs

  hold = 0.05
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }
  let(:released) { [] }
  let!(:subscription) { Ferrolock.subscribe(:released) { |_, payload| released << payload } }

  after { Ferrolock.unsubscribe(subscription) }

  def hold_of(primitive, name)
    released.select { |payload| payload.values_at(:primitive, :name) == [primitive, name] }.map { |p| p[:held] }
  end

  it "sends :released with :held when a DistMutex, DualLock or ConcurrentLimiter hold ends" do
    Ferrolock::DistMutex.new("holds:mutex").synchronize { sleep(hold) }
    mutex = Ferrolock::DistMutex.new("holds:unlock")
    mutex.lock
    sleep(hold)
    mutex.unlock
    Ferrolock::DualLock.new("holds:dual").run { sleep(hold) }
    Ferrolock::ConcurrentLimiter.new("holds:limit", 2).within_limit { sleep(hold) }
    { dist_mutex: %w[holds:mutex holds:unlock], dual_lock: %w[holds:dual],
      concurrent_limiter: %w[holds:limit] }.each do |primitive, names|
      names.each do |name|
        helds = hold_of(primitive, name)
        expect(helds.size).to eq(1), "#{primitive} #{name}: #{released.inspect}"
        expect(helds.first).to be_a(Float).and(be >= hold)
      end
    end
  end

  it "sends one for a block that raised too, and for DistMutex#sleep's release, not for auto_release: false" do
    limiter = Ferrolock::ConcurrentLimiter.new("holds:raised", 1)
    expect { limiter.within_limit { raise "boom" } }.to raise_error("boom")
    mutex = Ferrolock::DistMutex.new("holds:sleep")
    mutex.synchronize do
      sleep(hold)
      mutex.sleep(0.01)
    end
    Ferrolock::DistMutex.new("holds:expiring", expire: 0.2, auto_release: false).synchronize { nil }
    expect(hold_of(:concurrent_limiter, "holds:raised").size).to eq(1)
    sleep_holds = hold_of(:dist_mutex, "holds:sleep")
    expect(sleep_holds.size).to eq(2) # released by sleep, then by the block's end after it locked again
    expect(sleep_holds.first).to be >= hold
    expect(hold_of(:dist_mutex, "holds:expiring")).to eq([])
  end

  it "sends none for a hold never granted (over limit, skipped)" do
    limiter = Ferrolock::ConcurrentLimiter.new("holds:full", 1, wait_timeout: 0)
    limiter.within_limit { limiter.within_limit { nil } rescue Ferrolock::OverLimit } # rubocop:disable Style/RescueModifier
    expect(hold_of(:concurrent_limiter, "holds:full").size).to eq(1)
  end

  it "sends :held for a limits_concurrency job's slot, from its perform's start" do
    ActiveJob::Base.logger = Logger.new(nil)
    klass = job_class("HeldJob", to: 1, key: ->(account, _n) { account }) do
      define_method(:perform) { |_account, _n| sleep(hold) }
    end
    klass.perform_later("a", 1)
    work_off(klass)
    payload = released.find { |p| p[:primitive] == :limits_concurrency }
    expect(payload).to include(name: "HeldJob/a", forced: false)
    expect(payload[:held]).to be >= hold
  ensure
    Ferrolock::ActiveJob::Slots.reset!
  end

  # Issue 41: releases that are not the holder's own. The reaper's (a thread ended holding a DistMutex)
  # and an operator's (Admin#force_release) report the hold where Redis or this process dates it.
  it "sends :held for a DistMutex released by the reaper and one released by an operator (Redis' clock)" do
    Thread.new { Ferrolock::DistMutex.new("holds:reaped").lock.then { sleep(hold) } }.join
    wait_until(timeout: 10, what: "the reaper's release") { hold_of(:dist_mutex, "holds:reaped").any? }
    reaped = released.find { |payload| payload[:name] == "holds:reaped" }
    expect(reaped).to include(owner_gone: true)
    expect(reaped[:held]).to be >= hold

    holder = Thread.new do
      Ferrolock::DistMutex.new("holds:forced").synchronize { sleep(hold * 4) until Thread.current[:stop] }
    rescue Ferrolock::LockLost
      nil
    end
    wait_until { admin.show("holds:forced").any? }
    sleep(hold)
    expect(admin.force_release("holds:forced").map(&:kind)).to eq([:dist_mutex])
    holder[:stop] = true
    holder.join
    forced = released.select { |payload| payload[:name] == "holds:forced" && payload[:forced] }
    expect(forced.size).to eq(1)
    expect(forced.first[:held]).to be_a(Float).and(be >= hold)
    limiter = Ferrolock::ConcurrentLimiter.new("holds:forced-slot", 1)
    slot_holder = Thread.new do
      limiter.within_limit { sleep(hold * 4) }
    rescue Ferrolock::LockLost
      nil
    end
    wait_until { limiter.status[:in_use] == 1 }
    admin.force_release("holds:forced-slot", kind: :concurrent_limiter)
    slot_holder.join
    # A slot's grant is dated nowhere in Redis (its score is the lease deadline): forced, without :held.
    expect(released.find { |p| p[:name] == "holds:forced-slot" && p[:forced] }).not_to have_key(:held)
  end

  describe "in history" do
    include_context "with history on"

    it "counts holds as a histogram per name, read back with their percentiles beside the waits'" do
      quiet_history_thread
      mutex = Ferrolock::DistMutex.new("holds:history")
      3.times { mutex.synchronize { sleep(hold) } }
      Ferrolock::ConcurrentLimiter.new("holds:history", 1).within_limit { nil }
      Ferrolock::History.flush!
      stats = admin.stats("holds:history", since: "1h")[:primitives]
      expect(stats["dist_mutex"][:counts]).to eq("acquired" => 3, "released" => 3)
      holds = stats["dist_mutex"][:holds]
      expect(holds[:samples]).to eq(3)
      # A hold of 50 ms or more is in the 64 ms step or above (power-of-two ms upper bounds).
      expect(holds[:p50]).to be >= 0.064
      expect(holds[:p50]).to be <= holds[:p99]
      expect(stats["dist_mutex"][:waits][:samples]).to eq(3)
      expect(stats["concurrent_limiter"][:holds][:samples]).to eq(1)
      series = stats["dist_mutex"][:series]
      expect(series.sum { |bucket| bucket[:holds][:samples] }).to eq(3)
      fields = redis.hgetall(redis.keys("ferrolock:{history}:m:*").first).keys
      expect(fields).to include(match(/\Adist_mutex\|h\d+\|holds:history\z/), "dist_mutex|released|holds:history")
    end

    it "counts the holds of a reaped and a force-released DistMutex" do
      Thread.new { Ferrolock::DistMutex.new("holds:others").lock }.join
      wait_until(timeout: 10, what: "the reaper's release") { hold_of(:dist_mutex, "holds:others").any? }
      holder = Thread.new do
        Ferrolock::DistMutex.new("holds:others").synchronize { sleep(hold) until Thread.current[:stop] }
      rescue Ferrolock::LockLost
        nil
      end
      wait_until { admin.show("holds:others").any? }
      admin.force_release("holds:others")
      holder[:stop] = true
      holder.join
      Ferrolock::History.flush!
      stats = admin.stats("holds:others", since: "1h")[:primitives]["dist_mutex"]
      expect(stats[:counts]).to include("owner_gone" => 1, "released" => 2)
      expect(stats[:holds][:samples]).to eq(2)
    end

    it "leaves hold steps out of a kind's busiest names (events only)" do
      Ferrolock::DistMutex.new("holds:kind").synchronize { nil }
      Ferrolock::History.flush!
      entry = admin.kind_stats(:dist_mutex, since: 60)[:names].find { |e| e[:name] == "holds:kind" }
      expect(entry[:counts]).to eq("acquired" => 1, "released" => 1)
    end
  end
end
