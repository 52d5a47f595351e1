# frozen_string_literal: true

require "json"
require "timeout"
require_relative "support/redis_cluster"
require_relative "support/cli_runner"

# Every primitive and both Sidekiq middlewares on a real 3-master Redis Cluster (with a replica each),
# started once for this process (spec/support/redis_cluster.rb). Exclusion is counted, not assumed:
# child processes count how many are inside each name at once in the single-node test Redis.
RSpec.describe "Redis Cluster" do
  include FerrolockTest::CliRunner

  let(:cluster) { FerrolockTest::RedisCluster.shared }
  let(:probe) { FerrolockTest.redis_server.redis }
  let(:child) { File.join(FerrolockTest::ROOT, "spec/support/contention_child.rb") }

  before do
    cluster.flushall
    Ferrolock.configure { |c| c.redis_cluster = cluster.urls }
  end

  after { Ferrolock.configure { |c| c.redis_cluster = nil } }

  # The master that holds a name's keys (all of them share the name's hash slot).
  def keys_on(server, name)
    server.redis.call("KEYS", "ferrolock:{#{name}}:*")
  end

  # Runs `processes` contention children at once; returns their JSON reports.
  def contend(processes: 2, timeout: 120, **env)
    env = env.to_h { |k, v| [k.to_s.upcase, v.to_s] }.merge("CLUSTER" => cluster.urls.join(","))
    Array.new(processes) { Thread.new { run_ruby("load #{child.dump}", env: env, timeout: timeout) } }.map do |thread|
      out, err, status = thread.value
      expect(status).to be_success, "contention child failed:\n#{err}\n#{out}"
      JSON.parse(out.lines.last)
    end
  end

  def max_inside(names)
    names.map { |name| probe.get("max:#{name}").to_i }.max
  end

  it "says what it is connected to, without passwords" do
    client = Ferrolock::Client.new(cluster: [cluster.urls.first.sub("redis://", "redis://:secret@"),
                                             { host: "127.0.0.1", port: cluster.servers[1].port, password: "s3" }])
    expect(client.inspect).to include("cluster redis://:***@127.0.0.1:#{cluster.servers.first.port}, ")
    expect(client.inspect).not_to include("secret")
    expect(client.inspect).not_to include("s3")
    expect(Ferrolock.client.redacted_url).to start_with("cluster redis://127.0.0.1:")
  end

  it "runs every primitive unchanged with names on each of the 3 masters" do
    names = cluster.names_on_each_master("every")
    masters = names.map { |name| cluster.master_for(FerrolockTest::RedisCluster.slot(name)) }
    expect(masters.uniq.size).to eq(3)

    names.zip(masters).each do |name, master|
      mutex = Ferrolock::DistMutex.new(name)
      mutex.synchronize do
        expect(keys_on(master, name)).to include("ferrolock:{#{name}}:lock")
        expect(Ferrolock::DistMutex.new(name).try_lock).to be(false)
        expect(mutex.fencing_token).to be > 0
      end
      expect(Ferrolock::DistMutex.new(name).locked?).to be(false)

      limiter = Ferrolock::ConcurrentLimiter.new(name, 2, wait_timeout: 0)
      limiter.within_limit do
        limiter.within_limit { expect(limiter.status).to include(limit: 2, in_use: 2) }
        expect { limiter.within_limit { nil } }.not_to raise_error
      end
      expect(limiter.status[:in_use]).to eq(0)

      dual = Ferrolock::DualLock.new("dual-#{name}")
      expect(dual.run { expect(dual.executing?).to be(true) }).to be(true)

      message_lock = Ferrolock::Shoryuken::MessageLock.new
      expect(message_lock.process(name, "m1") { :processed }).not_to be_nil
      expect(Ferrolock::FairTenant.queue_for([{ threshold: 1, per: 60, queue: "slow" }],
                                             job_class: "J", tenant: name, jid: "j1", queue: "fast")).to eq("fast")
      expect(Ferrolock::FairTenant.queue_for([{ threshold: 1, per: 60, queue: "slow" }],
                                             job_class: "J", tenant: name, jid: "j2", queue: "fast")).to eq("slow")
    end
  end

  it "changes a limiter's limit live on each master (Admin's override, read by the limiter's scripts)" do
    admin = Ferrolock::Admin.new
    cluster.names_on_each_master("live").each do |name|
      limiter = Ferrolock::ConcurrentLimiter.new(name, 2, wait_timeout: 0)
      admin.set_limit(name, 1)
      limiter.within_limit { expect { limiter.within_limit { nil } }.to raise_error(Ferrolock::OverLimit) }
      admin.pause(name)
      expect { limiter.within_limit { nil } }.to raise_error(Ferrolock::OverLimit)
      expect(admin.limiters(name).items.map { |info| info.override.to_h }).to eq([{ limit: 1, paused: true }])
      admin.clear_override(name)
      limiter.within_limit { limiter.within_limit { expect(limiter.status).to include(in_use: 2) } }
    end
  end

  # Its scripts are routed by their key (not by the script's SHA, as a plain EVALSHA command is).
  it "is what the ferrolock command reads when the environment names it, every master, with the hint" do
    names = cluster.names_on_each_master("cli")
    client = Ferrolock::Client.new(cluster: cluster.urls, namespace: "myapp")
    mutexes = names.map { |name| Ferrolock::DistMutex.new(name, client: client).tap(&:lock) }
    env = { "FERROLOCK_REDIS_CLUSTER" => cluster.urls.join(",") }
    out, err, code = run_ferrolock("locks", "--json", env: env.merge("FERROLOCK_NAMESPACE" => "myapp"))
    expect(code).to eq(0), err
    expect(JSON.parse(out).map { |lock| lock["name"] }).to match_array(names)
    out, err, code = run_ferrolock("locks", "--json", env: env)
    expect([code, out, err]).to match([0, "[]\n", include('found under namespace "myapp"')])
  ensure
    mutexes&.each(&:unlock)
  end

  it "runs the Sidekiq uniqueness lock with digests on each of the 3 masters" do
    digests = cluster.names_on_each_master("unique")
    masters = digests.map { |digest| cluster.master_for(FerrolockTest::RedisCluster.slot(digest)) }
    expect(masters.uniq.size).to eq(3)
    digests.zip(masters).each do |digest, master|
      lock = Ferrolock::Sidekiq::Unique::Lock.new(digest)
      expect(lock.take("jid-a", 60)).to be_nil
      expect(keys_on(master, digest)).to eq([lock.key])
      expect(Ferrolock::Sidekiq::Unique::Lock.new(digest).take("jid-b", 60)).to eq("jid-a") # the duplicate
      expect(lock.release("jid-b")).to be(false)
      expect(lock.expire("jid-a", 30)).to be(true)
      expect(master.redis.call("PTTL", lock.key)).to be_between(1, 30_000)
      expect(lock.hand_over("jid-a", "jid-c", 60)).to be(true)
      expect(lock.hand_over("jid-a", "jid-d", 60)).to be(false)
      expect(lock.holder).to eq("jid-c")
      expect(lock.release("jid-c")).to be(true)
      expect(lock.holder).to be_nil
      expect(keys_on(master, digest)).to be_empty
    end
  end

  it "keeps working in a forked child, and a Timeout ends a wait on another master at once" do
    names = cluster.names_on_each_master("fork")
    names.each { |name| Ferrolock::DistMutex.new(name).synchronize { nil } } # pools to every master in use
    pid = fork do
      names.each { |name| Ferrolock::DistMutex.new(name).synchronize { nil } }
      exit!(0)
    rescue StandardError
      exit!(1)
    end
    expect(Process.wait2(pid).last).to be_success

    held = Ferrolock::DistMutex.new(names.last)
    held.lock
    waiter = Ferrolock::DistMutex.new(names.last)
    waited = elapsed { expect { Timeout.timeout(0.2) { waiter.lock } }.to raise_error(Timeout::Error) }
    expect(waited).to be < 5
    expect(waiter.owned?).to be(false)
    held.unlock
    # The unlock may hand the lock to the interrupted wait's entry before that wait's background
    # clean-up passes it on (as in interrupt_atomicity_spec).
    expect { wait_until(timeout: 1) { waiter.try_lock } }.not_to raise_error
    waiter.unlock
  end

  it "runs both Sidekiq middlewares unchanged (Sidekiq on one Redis, ferrolock on the cluster)" do
    require "sidekiq"
    Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
    Sidekiq.configure_client { |c| c.redis = { url: FerrolockTest.redis_server.url } }
    names = cluster.names_on_each_master("sk")
    names.each do |name|
      6.times { |i| Sidekiq::Client.push("class" => "ClusterLimitedJob", "args" => [name, i]) }
      4.times { |i| Sidekiq::Client.push("class" => "ClusterDualLockJob", "args" => [name, i]) }
    end
    env = { "FERROLOCK_REDIS_CLUSTER" => cluster.urls.join(", ") }
    with_sidekiq("spec/fixtures/cluster_app.rb", concurrency: 8, env: env) do |sidekiq|
      wait_until(timeout: 60, interval: 0.1) do
        raise "Sidekiq died:\n#{sidekiq.log}" unless sidekiq.running?

        probe.scard("done:limit") == 18 && probe.scard("done:dual").positive?
      end
    end
    names.each do |name|
      expect(probe.get("max:limit:#{name}").to_i).to be_between(1, 2)
      expect(probe.get("max:dual:#{name}").to_i).to eq(1)
    end
  end

  describe "exclusion across 2 processes x 4 threads" do
    it "DistMutex: one holder at a time on each master" do
      names = cluster.names_on_each_master("mx")
      reports = contend(kind: "mutex", names: names.join(","), sections: 30)
      expect(reports.map { |r| r["errors"] }).to all(eq({}))
      expect(reports.sum { |r| r["sections"] }).to eq(2 * 4 * 30)
      expect(max_inside(names)).to eq(1)
    end

    it "ConcurrentLimiter(3): at most 3 holders, and 3 reached" do
      reports = contend(kind: "limiter", names: "lim", limit: 3, sections: 30, hold: 0.02)
      expect(reports.map { |r| r["errors"] }).to all(eq({}))
      expect(reports.sum { |r| r["sections"] }).to eq(2 * 4 * 30)
      expect(probe.get("max:lim").to_i).to eq(3)
    end

    it "DualLock: one runs at a time per key" do
      names = cluster.names_on_each_master("dl")
      reports = contend(kind: "dual", names: names.join(","), sections: 30)
      expect(reports.map { |r| r["errors"] }).to all(eq({}))
      expect(reports.sum { |r| r["sections"] }).to be_positive
      expect(max_inside(names)).to eq(1)
    end
  end

  # Runs 2 processes x 4 threads on names until the block returns, then stops them.
  def contend_while(names, **env)
    probe.del("stop", "sections")
    runners = Thread.new { contend(kind: "mutex", names: names.join(","), hold: 0.01, **env) }
    yield
    probe.set("stop", "1")
    runners.value
  end

  def wait_for_sections(more, timeout: 30)
    target = probe.get("sections").to_i + more
    wait_until(timeout: timeout, interval: 0.02) { probe.get("sections").to_i >= target }
  end

  it "keeps exclusion while the lock's slot migrates to other masters under 8 threads in 2 processes" do
    name = "migrating"
    slot = FerrolockTest::RedisCluster.slot(name)
    reports = contend_while([name]) do
      wait_for_sections(30)
      others = cluster.masters - [cluster.master_for(slot)]
      others.each do |target|
        cluster.migrate_slot(slot, to: target)
        expect(cluster.master_for(slot)).to eq(target)
        wait_for_sections(30)
      end
    end
    expect(reports.map { |r| r["errors"] }).to all(eq({}))
    expect(probe.get("max:#{name}").to_i).to eq(1)
  end

  # Replication is asynchronous: a grant the master acknowledged but had not yet sent to its
  # replica dies with it, and a second holder can then enter. The window is microseconds on
  # loopback, so this normally ends with 0 overlaps and ConnectionErrors only; when it happens, it is
  # never silent: the holder that lost its lease gets LockLost at release.
  it "survives kill -9 of a master while locks are held and waited on: ConnectionError only, no silent overlap" do
    names = cluster.names_on_each_master("kill")
    victim = cluster.master_for(FerrolockTest::RedisCluster.slot(names.first))
    probe.del("overlaps")
    reports = contend_while(names, hold: 0.05) do
      wait_for_sections(30)
      cluster.kill_master(victim)
      wait_for_sections(60, timeout: 60) # work resumes on the promoted replica
    end
    errors = reports.flat_map { |r| r["errors"].flat_map { |text, count| [text.split(": ").first] * count } }
    expect(errors.uniq - ["Ferrolock::ConnectionError", "Ferrolock::LockLost"]).to eq([]), reports.inspect
    expect(probe.get("overlaps").to_i).to be <= errors.count("Ferrolock::LockLost")
    expect(errors).to include("Ferrolock::ConnectionError") # the kill was seen by callers
  ensure
    cluster.revive(victim) if victim
  end
end
