# frozen_string_literal: true

require "spec_helper"
require "digest"

# Stands in for a Sidekiq job class with a uniqueness option (Admin only asks get_sidekiq_options).
unless defined?(FerrolockAdminUniqueJob)
  class FerrolockAdminUniqueJob
    def self.get_sidekiq_options # rubocop:disable Naming/AccessorMethodName -- Sidekiq's name
      { "lock" => "until_executed" }
    end
  end
end

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

  it "counts the live waiters of a line, granted through an inbox or a grant list, not the dead ones" do
    redis = FerrolockTest.redis_server.redis
    seconds, micros = redis.call("TIME")
    now = (Integer(seconds) * 1000) + (Integer(micros) / 1000)
    key = "ferrolock:{entries}:waiters"
    redis.call("RPUSH", key, "a|#{now + 60_000}", "b|#{now + 60_000}|@0f1e2d3c4b5a69788796a5b4c3d2e1f0",
               "c|#{now - 1}|@0f1e2d3c4b5a69788796a5b4c3d2e1f0", "d|#{now - 1}")
    expect(Ferrolock::Admin.new.show("entries").map(&:waiters)).to eq([2])
  ensure
    redis&.call("DEL", key)
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

  it "lists uniqueness digests and rate limiters on every master of a Redis Cluster, and force-deletes a digest" do
    require_relative "support/redis_cluster"
    cluster = FerrolockTest::RedisCluster.shared
    cluster.flushall
    client = Ferrolock::Client.new(cluster: cluster.urls)
    cluster_admin = described_class.new(client: client)
    digests = Array.new(30) { |i| "unique:ClusterJob:#{Digest::SHA256.hexdigest("cluster #{i}")}" }
    digests.each_with_index { |d, i| Ferrolock::Sidekiq::Unique::Lock.new(d, client: client).take("jid-#{i}", 600) }
    expect(digests.map { |d| cluster.master_for(FerrolockTest::RedisCluster.slot(d)) }.uniq.size).to eq(3)
    seen = []
    cursor = "0"
    50.times do
      page = cluster_admin.uniques("ClusterJob", cursor: cursor, per_page: 5)
      seen.concat(page.items.map(&:digest))
      break if page.last?

      cursor = page.cursor
    end
    expect(seen.uniq).to match_array(digests)
    names = cluster.names_on_each_master("cluster-rate")
    limiters = names.map { |name| Ferrolock::RateLimiter.bucket(name, 2, 30 * 86_400, client: client) }
    limiters.each { |limiter| limiter.within_limit { nil } }
    infos = cluster_admin.rate_limiters("cluster-rate-*").items
    expect(infos.map { |i| [i.name, i.remaining, i.reserved] }).to match_array(names.map { |n| [n, 1, 0] })
    expect(cluster_admin.force_release(digests.first).map(&:token)).to eq(["jid-0"])
    expect(cluster_admin.show(digests.first)).to eq([])
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

  describe "uniqueness digests" do
    # UniqueDigest's shape: "unique:<class>:<SHA-256 hex>".
    def digest(job_class, seed)
      "unique:#{job_class}:#{Digest::SHA256.hexdigest("admin-spec #{seed}")}"
    end

    def unique_lock(digest)
      Ferrolock::Sidekiq::Unique::Lock.new(digest)
    end

    it "lists each digest once with its push-time jid and TTL, run-time stages and lock type" do
      pushed = digest("FerrolockAdminUniqueJob", 1)
      running = digest("AdminWhileJob", 2)
      dual = digest("AdminDualJob", 3)
      expect(unique_lock(pushed).take("jid-pushed", 600)).to be_nil
      mutex = Ferrolock::DistMutex.new(Ferrolock::InternalName.new("#{running}:run"))
      mutex.lock
      # until_and_while_executing: one job runs, a duplicate waits, and a third was pushed meanwhile.
      entered = Queue.new
      stay = Queue.new
      runner = Thread.new do
        Ferrolock::DualLock.new(Ferrolock::InternalName.new("#{dual}:run"), exec_ttl: 60).synchronize do
          (entered << 1) && stay.pop
        end
      end
      entered.pop
      waiter = Thread.new do
        Ferrolock::DualLock.new(Ferrolock::InternalName.new("#{dual}:run"), exec_ttl: 60).synchronize { stay.pop }
      end
      wait_until(timeout: 15, what: "the DualLock duplicate waits") { admin.show("#{dual}:run").first&.wait }
      expect(unique_lock(dual).take("jid-third", 600)).to be_nil

      items = admin.uniques.items.to_h { |info| [info.digest, info] }
      expect(items.keys).to contain_exactly(pushed, running, dual)
      expect(items[pushed].to_h).to include(job_class: "FerrolockAdminUniqueJob", lock_type: :until_executed,
                                            jid: "jid-pushed", stages: [:pushed], running: nil,
                                            key: "ferrolock:{#{pushed}}:lock")
      expect(items[pushed].ttl).to be_between(1, 600)
      expect(items[running].to_h).to include(job_class: "AdminWhileJob", lock_type: :while_executing, jid: nil,
                                             ttl: nil, stages: [:running])
      expect(items[running].running.holder.pid).to eq(Process.pid)
      expect(items[dual].to_h).to include(lock_type: :until_and_while_executing, jid: "jid-third",
                                          stages: %i[pushed running waiting])
      # A push-time lock's value is a jid, not a DistMutex token: not on the Locks page; run locks are.
      expect(admin.locks.items.map(&:name)).to contain_exactly("#{running}:run", "#{dual}:run")
      expect(admin.uniques("FerrolockAdmin*").items.map(&:digest)).to eq([pushed])
      expect(admin.uniques("unique:AdminWhile*").items.map(&:digest)).to eq([running])
      expect(admin.uniques("Nobody*").items).to eq([])
      expect(admin.show(pushed).map { |info| info.to_h.except(:ttl) }).to eq([items[pushed].to_h.except(:ttl)])
      expect(admin.show("#{running}:run").map(&:kind)).to eq([:dist_mutex])
    ensure
      mutex&.unlock
      stay&.<< 1
      stay&.<< 1
      [runner, waiter].compact.each { |t| t.join(10) }
    end

    it "pages through many digests by SCAN cursor, every digest on some page" do
      digests = Array.new(150) { |i| digest("AdminPagedJob", i) }
      digests.each_with_index { |d, i| unique_lock(d).take("jid-#{i}", 600) }
      # two keys of one digest: still one row per page
      running = Ferrolock::DistMutex.new(Ferrolock::InternalName.new("#{digests.first}:run"))
      running.lock
      seen = []
      cursor = "0"
      pages = 0
      loop do
        page = admin.uniques("AdminPagedJob", cursor: cursor, per_page: 20)
        expect(page.items.map(&:digest)).to eq(page.items.map(&:digest).uniq)
        seen.concat(page.items.map(&:digest))
        pages += 1
        break if page.last?
        raise "too many pages" if pages > 100

        cursor = page.cursor
      end
      expect(pages).to be > 1
      expect(seen.uniq).to match_array(digests)
    ensure
      # Held past the example, its lease would be renewed until a later flush, then reported
      # lost in whichever example runs then.
      running&.unlock
    end

    it "force-deletes a digest's lock by its jid through the lock's own script; a duplicate can take it then" do
      name = digest("AdminReleasedJob", 1)
      lock = unique_lock(name)
      lock.take("jid-first", 600)
      expect(admin.force_release(name, token: "jid-someone-else")).to eq([])
      expect(admin.force_release(name, kind: :dist_mutex)).to eq([]) # a digest is no DistMutex
      expect(lock.holder).to eq("jid-first")
      expect(lock.hand_over("jid-first", "jid-replacing", 600)).to be(true) # on_conflict: :replace
      expect(admin.force_release(name, token: "jid-first")).to eq([]) # token-checked: a new holder stays
      expect(admin.force_release(name).map(&:to_h)).to eq([{ kind: :unique_lock, name: name, token: "jid-replacing" }])
      expect(lock.holder).to be_nil
      expect(admin.show(name)).to eq([])
      expect(lock.take("jid-duplicate", 600)).to be_nil # a duplicate push is no longer refused
      expect(admin.force_release("not-a-digest", kind: :unique_lock)).to eq([])
    end
  end

  describe "rate limiters" do
    # 30 days: a fixed window's boundary (a multiple of the interval since the epoch) falls inside
    # an example once in years of runs, not once an hour.
    interval = 30 * 86_400

    # One call that reserves a later slot and sleeps until it (killed by the example).
    def reserve(limiter, cost = 1)
      thread = Thread.new { limiter.within_limit(cost, wait_timeout: limiter.interval + 60) { nil } }
      wait_until(timeout: 15, what: "#{limiter.name} reserves") do
        info = admin.rate_limiters(limiter.name).items.first
        info && (info.reserved.nil? || info.reserved.positive?) && limiter.status[:remaining].zero?
      end
      thread
    end

    it "shows each kind's limit, remaining now, reset in and reserved calls, as its own status script says" do
      limiters = {
        window: Ferrolock::RateLimiter.window("admin-rate:window", 2, interval),
        sliding_window: Ferrolock::RateLimiter.window("admin-rate:sliding", 2, interval, sliding: true),
        bucket: Ferrolock::RateLimiter.bucket("admin-rate:bucket", 2, interval),
        leaky: Ferrolock::RateLimiter.leaky("admin-rate:leaky", 2, interval, burst: 1),
        points: Ferrolock::RateLimiter.points("admin-rate:points", 10, interval)
      }
      idle = Ferrolock::RateLimiter.window("admin-rate:idle", 2, interval)
      limiters.each_value { |limiter| limiter.within_limit(limiter.kind == :points ? 3 : 1) { nil } }
      infos = admin.rate_limiters("admin-rate:*").items.to_h { |info| [info.kind, info] }
      expect(infos.keys).to match_array(limiters.keys) # idle: no state in Redis, not listed
      limiters.each do |kind, limiter|
        status = limiter.status
        expect(infos[kind].to_h).to include(name: limiter.name, limit: limiter.count, interval: interval.to_f,
                                            known: true, remaining: status[:remaining],
                                            reserved: kind == :points ? nil : 0)
        expect(infos[kind].reset_in).to be_within(60).of(status[:reset_in])
      end
      expect(infos[:leaky].burst).to eq(1)
      expect(infos.values_at(:window, :bucket, :points).map(&:remaining)).to eq([1, 1, 7])
      expect(idle.status[:remaining]).to eq(2)

      threads = limiters.values_at(:window, :sliding_window, :bucket, :leaky).map do |limiter|
        limiter.within_limit { nil } if limiter.status[:remaining].positive?
        reserve(limiter)
      end
      infos = admin.rate_limiters("admin-rate:*").items.to_h { |info| [info.kind, info] }
      expect(infos.values_at(:window, :sliding_window, :bucket, :leaky).map { |i| [i.kind, i.reserved, i.remaining] })
        .to eq([[:window, 1, 0], [:sliding_window, 1, 0], [:bucket, 1, 0], [:leaky, 1, 0]])
    ensure
      threads&.each(&:kill)&.each { |t| t.join(10) }
    end

    it "shows what Redis alone tells for a limiter this process does not define" do
      # State written without a Ferrolock::RateLimiter object: nothing in this process knows its limit.
      native = Ferrolock::Native::RateLimiter.new(Ferrolock.client.native, "admin-rate:foreign", "sliding_window", 3,
                                                  3600.0, 0)
      expect(native.acquire(1, 0.0).first).to be(true)
      info = admin.rate_limiters("admin-rate:foreign").items.first
      expect(info.to_h).to include(name: "admin-rate:foreign", kind: :sliding_window, limit: nil, interval: nil,
                                   remaining: nil, reserved: 0, known: false)
      expect(info.reset_in).to be_between(3000, 3600) # the key's TTL: when it is full again
      # Another namespace's limiter of that name is not this one's definition.
      elsewhere = Ferrolock::Client.new(namespace: "elsewhere")
      Ferrolock::RateLimiter.window("admin-rate:foreign", 3, :hour, sliding: true, client: elsewhere)
      expect(admin.rate_limiters("admin-rate:foreign").items.first.known).to be(false)
    end

    it "still knows the app's limiter after many short-lived ones came and went" do
      # The hygiene spec makes 100k limiters in this process; a bounded most-recent list lost the
      # web fixture's constants that way (CI). The native objects keep the registry: the live ones stay.
      kept = Ferrolock::RateLimiter.bucket("admin-rate:kept", 4, :hour)
      20_000.times { |i| Ferrolock::RateLimiter.window("admin-rate:short-#{i}", 1, 1) }
      expect(kept.within_limit { :ok }).to eq(:ok)
      info = admin.rate_limiters("admin-rate:kept").items.first
      expect(info.to_h).to include(kind: :bucket, limit: 4, known: true)
    end

    it "rejects bad arguments with errors naming them" do
      expect { admin.uniques("a{b") }.to raise_error(ArgumentError, /pattern must not contain/)
      expect { admin.uniques(1) }.to raise_error(TypeError, /pattern must be a String/)
      expect { admin.rate_limiters("a}b") }.to raise_error(ArgumentError, /pattern must not contain/)
      expect { admin.rate_limiters(cursor: "x") }.to raise_error(ArgumentError, /cursor must be a SCAN cursor/)
      expect { admin.uniques(per_page: -1) }.to raise_error(ArgumentError, /per_page/)
      expect { admin.uniques(BasicObject.new) }.to raise_error(TypeError, /pattern must be a String/)
      expect { admin.rate_limiters(BasicObject.new) }.to raise_error(TypeError, /pattern must be a String/)
      expect { admin.force_release("unique:A:#{"0" * 64}", kind: :unique_lock, token: BasicObject.new) }
        .to raise_error(TypeError, /token/)
      native = Ferrolock.client.native
      expect { Ferrolock::Native::Admin.force_release(native, "unique_lock", "unique:x", "", 1.0, 1) }
        .to raise_error(ArgumentError, /empty/)
    end
  end
end
