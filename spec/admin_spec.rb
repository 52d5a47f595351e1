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

  it "shows a limiter's limit while it is in use: that of the latest caller to take a free slot" do
    three = Ferrolock::ConcurrentLimiter.new("shown", 3)
    five = Ferrolock::ConcurrentLimiter.new("shown", 5)
    three.within_limit do
      expect(admin.show("shown").first.limit).to eq(3)
      five.within_limit do
        expect(admin.limiters("shown").items.map(&:to_h)).to match([include(limit: 5, in_use: 2)])
      end
    end
    expect(admin.show("shown")).to eq([])
  end

  it "shows this process's own limit beside a different stored one, in Admin, the table and status" do
    three = Ferrolock::ConcurrentLimiter.new("mismatch", 3)
    three.within_limit do
      # Created after the slot was taken: this process now passes 5, Redis still says 3.
      five = Ferrolock::ConcurrentLimiter.new("mismatch", 5)
      info = admin.show("mismatch").first
      expect(info.to_h).to include(limit: 3, local_limit: 5, in_use: 1)
      expect(Ferrolock::Admin::Table.limit(info)).to eq("5 (stored 3)")
      expect(five.status).to eq(limit: 5, in_use: 1, waiting: 0, stored_limit: 3)
      expect(three.status).to eq(limit: 3, in_use: 1, waiting: 0) # the same limit: no second key
      five.within_limit do
        # Now 5 is stored too: one number again.
        expect(Ferrolock::Admin::Table.limit(admin.show("mismatch").first)).to eq("5")
      end
      expect(five.status).not_to have_key(:stored_limit)
      expect(three.status).to include(limit: 3, stored_limit: 5)
    end
    other = Ferrolock::Admin.new(client: Ferrolock::Client.new(namespace: "elsewhere"))
    Ferrolock::ConcurrentLimiter.new("mismatch", 2, client: other.client).within_limit do
      # Another namespace's "mismatch" is another limiter: its own local limit (2), not this one's 5.
      expect(other.show("mismatch").first.to_h).to include(limit: 2, local_limit: 2)
    end
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

  it "lists the locks held on every master of a Redis Cluster, page by page" do
    require_relative "support/redis_cluster"
    cluster = FerrolockTest::RedisCluster.shared
    cluster.flushall
    client = Ferrolock::Client.new(cluster: cluster.urls)
    names = cluster.names_on_each_master("spread") + Array.new(30) { |i| "many:#{i}" }
    mutexes = names.map { |name| Ferrolock::DistMutex.new(name, client: client).tap(&:lock) }
    cluster_admin = described_class.new(client: client)
    seen = []
    cursor = "0"
    50.times do
      page = cluster_admin.locks(cursor: cursor, per_page: 5)
      seen.concat(page.items.map(&:name))
      break if page.last?

      cursor = page.cursor
    end
    expect(seen.uniq).to match_array(names) # every master's locks, the 3 "spread" names included
    expect(cluster_admin.show(names.first).first.holder.pid).to eq(Process.pid)
  ensure
    mutexes&.each(&:unlock)
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
