# frozen_string_literal: true

# An operator's live override of a ConcurrentLimiter (Admin#set_limit, #pause, #resume,
# #clear_override): read by the acquire and release scripts themselves, so it holds from the next
# attempt of every caller; holders are never evicted; waiters are woken when it lets them in.
RSpec.describe Ferrolock::Admin::LimitOverride do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }
  let(:events) { [] }

  let!(:subscription) { Ferrolock.subscribe(:limit_changed) { |_, payload| events << payload } }

  after { Ferrolock.unsubscribe(subscription) }

  # Holds `count` slots of limiter in threads until the returned lambda is called.
  def hold(limiter, count)
    release = Queue.new
    threads = Array.new(count) { Thread.new { limiter.within_limit(wait_timeout: 10) { release.pop } } }
    wait_until { limiter.status[:in_use] >= count }
    lambda {
      count.times { release << true }
      threads.each(&:join)
    }
  end

  def can_enter?(limiter)
    limiter.within_limit(wait_timeout: 0) { true }
  rescue Ferrolock::OverLimit
    false
  end

  it "lowers the limit without evicting holders: new callers wait until fewer hold a slot than the new limit" do
    limiter = Ferrolock::ConcurrentLimiter.new("ovr:lower", 4, local_passes: 0)
    give_back = hold(limiter, 3)
    expect(admin.set_limit("ovr:lower", 2).to_h).to eq(limit: 2, paused: false)
    expect(limiter.status).to include(in_use: 3, limit: 4, override: { limit: 2, paused: false }) # nobody evicted
    expect(can_enter?(limiter)).to be(false)
    give_back.call
    expect(can_enter?(limiter)).to be(true)
    info = admin.limiters("ovr:lower").items.first
    expect(info.override.to_h).to eq(limit: 2, paused: false)
    expect(Ferrolock::Admin::Table.limit(info)).to eq("2 (set live; code: 4)")
    expect(events.last).to include(primitive: :concurrent_limiter, name: "ovr:lower", action: :set_limit, limit: 2)
  end

  it "hands a released slot to a waiter only while the holders are within the lowered limit, and never while paused" do
    limiter = Ferrolock::ConcurrentLimiter.new("ovr:handoff", 3, lease: 30, local_passes: 0)
    releases = Array.new(3) { Queue.new }
    holders = releases.map { |q| Thread.new { limiter.within_limit(wait_timeout: 10) { q.pop } } }
    wait_until { limiter.status[:in_use] == 3 }
    inside = Queue.new
    waiters = Array.new(2) { |i| Thread.new { limiter.within_limit(wait_timeout: 20) { (inside << i) && sleep(0.5) } } }
    wait_until { limiter.status[:waiting] == 2 }
    admin.set_limit("ovr:handoff", 1)
    2.times do |i|
      releases[i] << true
      holders[i].join
      sleep 0.3
      expect(inside.size).to eq(0) # 2, then 1 holder: not below the limit of 1
    end
    admin.pause("ovr:handoff")
    releases[2] << true
    holders[2].join
    sleep 0.3
    expect([inside.size, limiter.status[:in_use]]).to eq([0, 0]) # paused: the release handed nothing on
    admin.resume("ovr:handoff")
    waiters.each(&:join)
    expect(inside.size).to eq(2)
  end

  it "pauses: nobody enters, not even with no holder; resume lets the waiters in at once" do
    limiter = Ferrolock::ConcurrentLimiter.new("ovr:pause", 2, local_passes: 0)
    admin.pause("ovr:pause")
    expect(can_enter?(limiter)).to be(false)
    entered = Queue.new
    waiters = Array.new(3) { |i| Thread.new { limiter.within_limit(wait_timeout: 20) { entered << i } } }
    sleep 1.5
    expect(entered.size).to eq(0)
    expect(Ferrolock::Admin::Table.limit(admin.limiters("ovr:pause").items.first)).to start_with("paused")
    expect(admin.resume("ovr:pause").to_h).to eq(limit: nil, paused: false)
    waiters.each(&:join)
    expect(entered.size).to eq(3)
    expect(redis.exists("ferrolock:{ovr:pause}:override")).to eq(0) # resumed with no limit set: nothing left
  end

  it "wakes the waiters when the limit is raised while every holder keeps its slot" do
    limiter = Ferrolock::ConcurrentLimiter.new("ovr:raise", 1, lease: 30, local_passes: 0)
    give_back = hold(limiter, 1)
    waiters = Array.new(2) { Thread.new { limiter.within_limit(wait_timeout: 25) { Ferrolock.monotonic } } }
    wait_until { limiter.status[:waiting] == 2 }
    raised_at = Ferrolock.monotonic
    admin.set_limit("ovr:raise", 3)
    # Without the wake-up they would try again only when the holder's renewed lease nears its end (> 19 s).
    expect(waiters.map(&:value).max - raised_at).to be < 10
    give_back.call
  end

  it "keeps the limit in force across many threads while it changes: holders never above it" do
    name = "ovr:threads"
    limits = [4]
    epoch = 0
    lock = Mutex.new
    inside = 0
    excess = []
    entries = 0
    stop = false
    workers = Array.new(12) do
      Thread.new do
        limiter = Ferrolock::ConcurrentLimiter.new(name, 4, wait_timeout: 30, local_passes: 0)
        until stop
          before = lock.synchronize { epoch }
          limiter.within_limit do
            lock.synchronize do
              inside += 1
              entries += 1
              # Redis admitted this caller with the limit of some epoch from `before` to now.
              allowed = limits[before..epoch].max
              excess << [inside, allowed] if inside > allowed
            end
            sleep 0.01
            lock.synchronize { inside -= 1 }
          end
        end
      end
    end
    # While the write is under way either limit may be in force (an epoch of the larger one); once it
    # returned, every attempt that starts reads the new one.
    change = lambda do |limit, &write|
      lock.synchronize do
        limits << [limits.last, limit].max
        epoch += 1
      end
      write.call
      lock.synchronize do
        limits << limit
        epoch += 1
      end
      sleep 0.7
    end
    change.call(2) { admin.set_limit(name, 2) }
    change.call(6) { admin.set_limit(name, 6) }
    change.call(1) { admin.set_limit(name, 1) }
    change.call(0) { admin.pause(name) }
    sleep 0.3 # holders admitted before the pause leave
    paused_entries = lock.synchronize { entries }
    sleep 1
    expect(lock.synchronize { entries }).to eq(paused_entries)
    change.call(4) { admin.clear_override(name) } # the code's limit
    change.call(3) { admin.set_limit(name, 3) }
    stop = true
    workers.each(&:join)
    expect(excess).to eq([])
    expect(entries).to be > 50
    expect(events.map { |e| e[:action] }).to eq(%i[set_limit set_limit set_limit pause clear set_limit])
  end

  it "lives until cleared, expiring only when no acquisition used it for its TTL" do
    key = "ferrolock:{ovr:ttl}:override"
    admin.set_limit("ovr:ttl", 2)
    ttl = Ferrolock::Admin::LimitOverride::TTL * 1000
    expect(redis.pttl(key)).to be_between(ttl - 5000, ttl)
    redis.pexpire(key, 60_000)
    Ferrolock::ConcurrentLimiter.new("ovr:ttl", 5).within_limit { nil }
    expect(redis.pttl(key)).to be > ttl - 5000 # refreshed by use
    admin.clear_override("ovr:ttl")
    expect(redis.exists(key)).to eq(0)
  end

  it "sends limit_changed.ferrolock to ActiveSupport::Notifications" do
    require "active_support"
    require "active_support/notifications"
    seen = []
    listener = ActiveSupport::Notifications.subscribe("limit_changed.ferrolock") { |*, payload| seen << payload }
    admin.pause("ovr:as")
    expect(seen).to match([include(primitive: :concurrent_limiter, name: "ovr:as", action: :pause, paused: true)])
  ensure
    ActiveSupport::Notifications.unsubscribe(listener) if listener
    admin.clear_override("ovr:as")
  end

  it "refuses bad input naming the argument" do
    expect { admin.set_limit("ovr:bad", 0) }.to raise_error(ArgumentError, /limit/)
    expect { admin.set_limit("ovr:bad", "3") }.to raise_error(TypeError, /limit/)
    expect { admin.pause("ovr:{bad}") }.to raise_error(ArgumentError, /name/)
    expect { admin.pause("ovr:bad", kind: :rate_limiter) }.to raise_error(ArgumentError, /kind/)
  end
end
