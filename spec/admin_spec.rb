# frozen_string_literal: true

require "spec_helper"

# Ferrolock::Admin against a real Redis: what it reads agrees with what the primitives decide,
# and a force release wakes the waiters of every primitive, in another thread of this process.
RSpec.describe Ferrolock::Admin do
  let(:admin) { described_class.new }

  # Pops within `seconds`, else nil (a generous bound, far below the TTL a missed wake-up costs).
  def pop_within(queue, seconds)
    deadline = Ferrolock.monotonic + seconds
    loop do
      return queue.pop(true)
    rescue ThreadError
      return nil if Ferrolock.monotonic > deadline

      sleep 0.02
    end
  end

  it "force-releases a DualLock's running duplicate, and the waiting one runs at once" do
    holding = Queue.new
    stay = Queue.new
    runner = Thread.new do
      Ferrolock::DualLock.new("sync:1", exec_ttl: 60).synchronize do
        holding << 1
        stay.pop
      end
    rescue Ferrolock::LockLost
      nil # its EXEC lock was taken away: expected
    end
    holding.pop
    ran = Queue.new
    second = Thread.new { Ferrolock::DualLock.new("sync:1", exec_ttl: 60).synchronize { ran << :ran } }
    sleep 0.05 until admin.show("sync:1").first&.wait
    exec_token = admin.show("sync:1").first.exec.token

    released = admin.force_release("sync:1", kind: :dual_lock)
    expect(released.map(&:to_h)).to eq([{ kind: :dual_lock, name: "sync:1", token: exec_token }])
    expect(pop_within(ran, 15)).to eq(:ran) # the EXEC TTL is 60 s: only the wake-up explains this
  ensure
    stay&.<< 1
    [runner, second].compact.each { |t| t.join(5) }
  end

  it "force-releases one limiter slot by token, and a waiter takes it at once" do
    limiter = Ferrolock::ConcurrentLimiter.new("api", 1, lock_timeout: 60, wait_timeout: 30)
    holding = Queue.new
    stay = Queue.new
    holder = Thread.new do
      limiter.within_limit do
        holding << 1
        stay.pop
      end
    rescue Ferrolock::LockLost
      nil # its slot was taken away: expected
    end
    holding.pop
    entered = Queue.new
    second = Thread.new { limiter.within_limit { entered << :in } }
    sleep 0.05 until admin.show("api").first.waiting == 1
    token = admin.show("api").first.slots.first.token

    expect(admin.force_release("api", token: "someone-else")).to eq([])
    expect(admin.force_release("api", kind: "concurrent_limiter", token: token).map(&:token)).to eq([token])
    expect(pop_within(entered, 15)).to eq(:in)
  ensure
    stay&.<< 1
    [holder, second].compact.each { |t| t.join(5) }
  end

  it "leaves a DistMutex alone when its holder changed (token-checked)" do
    mutex = Ferrolock::DistMutex.new("report:1")
    mutex.lock
    expect(admin.force_release("report:1", kind: :dist_mutex, token: "an-old-holder")).to eq([])
    expect(mutex.owned?).to be(true)
    expect(admin.show("report:1").first.token).not_to be_nil
  ensure
    mutex.unlock if mutex&.owned?
  end

  it "routes each tenant to the queue FairTenant itself would pick, in both modes" do
    rules = [{ queue: "daily", threshold: 5, per: 86_400 }, { queue: "hourly", threshold: 2, per: 3600 }]
    %i[exact bounded].each do |mode|
      { "t0" => 0, "t2" => 2, "t3" => 3, "t6" => 6, "t9" => 9 }.each do |tenant, enqueues|
        (enqueues.zero? ? 1 : enqueues).times do |i|
          Ferrolock::FairTenant.queue_for(rules, job_class: "Admin#{mode}Job", tenant: tenant, jid: "#{tenant}-#{i}",
                                                 queue: "default", mode: mode, record: !enqueues.zero?)
        end
      end
      page = admin.tenants("Admin#{mode}Job", rules: rules, queue: "default", per_page: 100)
      expect(page.items.map(&:mode).uniq).to eq([mode])
      page.items.each do |info|
        decided = Ferrolock::FairTenant.queue_for(rules, job_class: info.job_class, tenant: info.tenant, jid: "check",
                                                         queue: "default", mode: mode, record: false)
        expect([mode, info.tenant, info.queue]).to eq([mode, info.tenant, decided])
      end
      expect(page.items.map(&:tenant)).to contain_exactly("t2", "t3", "t6", "t9") # t0 never recorded
    end
  end

  it "parses keys of a namespace holding glob characters, and only that namespace's" do
    odd = Ferrolock::Client.new(namespace: "app[1]*")
    mutex = Ferrolock::DistMutex.new("x:1", client: odd)
    other = Ferrolock::DistMutex.new("x:2", client: Ferrolock::Client.new(namespace: "app11"))
    mutex.lock
    other.lock
    expect(described_class.new(client: odd).locks.items.map(&:name)).to eq(["x:1"])
  ensure
    mutex&.unlock
    other&.unlock
  end

  it "rejects bad arguments with errors naming them" do
    expect { admin.locks("a{b") }.to raise_error(ArgumentError, /pattern must not contain/)
    expect { admin.locks(1) }.to raise_error(TypeError, /pattern must be a String/)
    expect { admin.locks(cursor: "12x") }.to raise_error(ArgumentError, /cursor must be a SCAN cursor/)
    expect { admin.locks(per_page: 0) }.to raise_error(ArgumentError, /per_page must be positive/)
    expect { admin.show("") }.to raise_error(ArgumentError, /name must not be empty/)
    expect { admin.force_release("x", kind: :bogus) }.to raise_error(ArgumentError, /kind must be one of/)
    expect { admin.force_release("x", token: "") }.to raise_error(ArgumentError, /token must not be empty/)
    expect { described_class.new(client: :nope) }.to raise_error(TypeError, /client must be a Ferrolock::Client/)
    native = Ferrolock.client.native
    expect { Ferrolock::Native::Admin.force_release(native, "bogus", "x", "t", 1.0, 1) }
      .to raise_error(ArgumentError, /kind/)
    expect { Ferrolock::Native::Admin.force_release(native, "dist_mutex", "a{b", "t", 1.0, 1) }
      .to raise_error(ArgumentError, /name/)
    expect { Ferrolock::Native::Admin.force_release(native, "dist_mutex", "x", "t", -1.0, 1) }
      .to raise_error(ArgumentError, /ttl/)
  end
end
