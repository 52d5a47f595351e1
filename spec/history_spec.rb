# frozen_string_literal: true

require_relative "support/history_on"
require_relative "support/redis_monitor"

# Ferrolock::History: events counted in this process, flushed as one script into per-minute and
# per-hour hashes of the test Redis (every one expiring), read back by Admin#stats.
RSpec.describe Ferrolock::History, time_limit: 60 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }

  include_context "with history on"

  def history_keys = redis.keys("ferrolock:{history}:*").sort

  let(:one_hold) { { "acquired" => 1, "released" => 1 } }

  it "counts each primitive's events by name, and reads them back with their waits' percentiles" do
    mutex = Ferrolock::DistMutex.new("history:mutex")
    3.times { mutex.synchronize { nil } }
    limiter = Ferrolock::ConcurrentLimiter.new("history:limit", 1, wait_timeout: 0)
    limiter.within_limit { 2.times { limiter.within_limit { nil } rescue Ferrolock::OverLimit } } # rubocop:disable Style/RescueModifier
    expect(Ferrolock::History.flush!).to be > 0

    mutex_stats = admin.stats("history:mutex", since: "1h")
    expect(mutex_stats).to include(name: "history:mutex", since: 3600, step: 60)
    expect(mutex_stats[:primitives].keys).to eq(["dist_mutex"])
    expect(mutex_stats[:primitives]["dist_mutex"]).to include(counts: { "acquired" => 3, "released" => 3 })
    waits = mutex_stats[:primitives]["dist_mutex"][:waits]
    expect(waits[:samples]).to eq(3)
    expect(waits[:p50]).to be_a(Float).and(be <= waits[:p99])
    limiter_counts = admin.stats("history:limit", since: 600)[:primitives]["concurrent_limiter"][:counts]
    expect(limiter_counts).to eq("acquired" => 1, "over_limit" => 2, "released" => 1)
    series = mutex_stats[:primitives]["dist_mutex"][:series]
    expect(series.size).to be_between(60, 61)
    expect(series.sum { |bucket| bucket[:counts].fetch("acquired", 0) }).to eq(3)
  end

  it "writes a flush as one script into a minute and an hour hash that expire after 8 and 72 hours" do
    quiet_history_thread
    Ferrolock::DistMutex.new("history:ttl").synchronize { nil }
    # The scripts the flush sent, by MONITOR: a server-wide count would also take in another thread's
    # script (a core script sent again as EVAL after NOSCRIPT: ci33's valkey lane counted 2).
    sent = FerrolockTest::RedisMonitor.watch(FerrolockTest.redis_server.url) do |monitor|
      Ferrolock::History.flush!
      monitor.lines_until_now
    end
    expect(sent.grep(/"EVAL(SHA)?" .*"ferrolock:\{history\}:/).size).to eq(1), sent.join("\n")
    minute, hour = history_keys.partition { |key| key.include?("}:m:") }
    expect([minute.size, hour.size]).to eq([1, 1])
    expect(redis.ttl(minute.first)).to be_between((8 * 3600) + 1, (8 * 3600) + 60)
    expect(redis.ttl(hour.first)).to be_between((72 * 3600) + 1, (73 * 3600))
    fields = redis.hgetall(minute.first)
    expect(fields.keys)
      .to contain_exactly("dist_mutex|acquired|history:ttl", match(/\Adist_mutex\|w\d+\|history:ttl\z/),
                          "dist_mutex|released|history:ttl", match(/\Adist_mutex\|h\d+\|history:ttl\z/))
    expect(fields.values).to eq(%w[1 1 1 1])
    expect(Ferrolock::History.flush!).to eq(0) # nothing new: no write
  end

  it "counts a kind no list knows, by the same rule" do
    Ferrolock.instrument(:some_new_kind, primitive: :dist_mutex, name: "history:new")
    Ferrolock::History.flush!
    expect(admin.stats("history:new", since: 60)[:primitives]["dist_mutex"][:counts]).to eq("some_new_kind" => 1)
  end

  it "counts uniqueness per job class and the Shoryuken lock per queue, not per digest or message" do
    Ferrolock.instrument(:skipped, primitive: :unique, key: "unique:ReportJob:abc", job_class: "ReportJob")
    Ferrolock.instrument(:skipped, primitive: :unique, key: "unique:ReportJob:def", job_class: "ReportJob")
    Ferrolock.instrument(:locked, primitive: :shoryuken_lock, queue: "orders", message_id: "m-1")
    Ferrolock::History.flush!
    expect(admin.stats("ReportJob", since: 60)[:primitives]["unique"][:counts]).to eq("skipped" => 2)
    expect(admin.stats("orders", since: 60)[:primitives]["shoryuken_lock"][:counts]).to eq("locked" => 1)
  end

  it "keeps at most MAX_NAMES names per flush in memory, the rest under (other)" do
    quiet_history_thread
    names = Ferrolock::History::Tally::MAX_NAMES + 200
    names.times { |i| Ferrolock.instrument(:acquired, primitive: :concurrent_limiter, name: "many-#{i}") }
    Ferrolock::History.flush!
    fields = redis.hgetall(history_keys.find { |key| key.include?("}:m:") })
    expect(fields.keys.count { |field| field.start_with?("concurrent_limiter|acquired|many-") })
      .to eq(Ferrolock::History::Tally::MAX_NAMES)
    expect(fields["concurrent_limiter|acquired|(other)"]).to eq("200")
  end

  it "folds a name new to a full bucket into (other) in Redis too" do
    quiet_history_thread
    stub_const("Ferrolock::History::Buckets::MAX_FIELDS", { "m" => 3, "h" => 100 })
    5.times { |i| Ferrolock.instrument(:acquired, primitive: :dist_mutex, name: "full-#{i}") }
    Ferrolock::History.flush!
    minute, hour = history_keys.partition { |key| key.include?("}:m:") }
    expect(redis.hlen(hour.first)).to eq(5)
    expect(redis.hgetall(minute.first).values.map(&:to_i).sum).to eq(5)
    expect(redis.hget(minute.first, "dist_mutex|acquired|(other)")).to eq("2")
  end

  it "flushes from its own thread every flush_every seconds" do
    Ferrolock::History.flush_every = 0.2
    Ferrolock::DistMutex.new("history:thread").synchronize { nil }
    wait_until(timeout: 10, what: "the thread's flush") do
      admin.stats("history:thread", since: 60)[:primitives].dig("dist_mutex", :counts) == one_hold
    end
    expect(Thread.list.map(&:name)).to include("ferrolock-history")
  end

  it "flushes at exit, and a forked child counts its own events only" do
    Ferrolock::DistMutex.new("history:fork").synchronize { nil } # counted here, before the fork
    pid = fork do
      Ferrolock::DistMutex.new("history:fork").synchronize { nil }
      exit(0) # at_exit flushes the child's one acquisition
    end
    expect(Process.wait2(pid).last).to be_success
    Ferrolock::History.flush!
    expect(admin.stats("history:fork", since: 60)[:primitives]["dist_mutex"][:counts])
      .to eq("acquired" => 2, "released" => 2)
  end

  it "flushes at the exit of a process that had it on" do
    run_ruby!(<<~RUBY, env: { "FERROLOCK_HISTORY" => "1" })
      require "ferrolock"
      4.times { Ferrolock::DistMutex.new("history:exit").synchronize { nil } }
    RUBY
    expect(admin.stats("history:exit", since: 60)[:primitives]["dist_mutex"][:counts])
      .to eq("acquired" => 4, "released" => 4)
  end

  it "writes nothing with ferrolock/testing loaded (an app's test suite), even in its Redis mode" do
    run_ruby!(<<~RUBY, env: { "FERROLOCK_HISTORY" => "1" })
      require "ferrolock"
      early = Ferrolock::DistMutex.new("history:early")
      early.synchronize { nil } # its Counter counts in the core from before Testing is installed
      require "ferrolock/testing"
      Ferrolock::Testing.real!
      2.times { Ferrolock::DistMutex.new("history:testing").synchronize { nil } }
      3.times { early.synchronize { nil } }
    RUBY
    expect(history_keys.flat_map { |key| redis.hkeys(key) }.grep(/history:testing/)).to eq([])
    # The one lock before Testing may have been flushed by the thread meanwhile; none after it.
    early = admin.stats("history:early", since: 60)[:primitives].dig("dist_mutex", :counts) || {}
    expect(early.fetch("acquired", 0)).to be <= 1
  end

  it "counts nothing when switched off" do
    Ferrolock.configure { |c| c.history = false }
    expect(Ferrolock::History.enabled?).to be(false)
    expect(Ferrolock.listening?(:acquired)).to be(false)
    Ferrolock::DistMutex.new("history:off").synchronize { nil }
    Ferrolock.configure { |c| c.history = true }
    Ferrolock::History.flush!
    expect(history_keys).to eq([])
  end

  it "logs and drops a flush Redis refuses, never raising, and logs again only after a minute" do
    log = StringIO.new
    Ferrolock.configure do |c|
      c.logger = Logger.new(log)
      c.redis_url = "redis://127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0"
      c.connect_timeout = 0.2
    end
    Ferrolock.instrument(:acquired, primitive: :dist_mutex, name: "history:down")
    expect(Ferrolock::History.flush!).to eq(0)
    expect(log.string).to include("history flush failed, 1 count(s) dropped", "Ferrolock::ConnectionError")
    Ferrolock.instrument(:acquired, primitive: :dist_mutex, name: "history:down")
    expect(Ferrolock::History.flush!).to eq(0)
    expect(log.string.scan("history flush failed").size).to eq(1) # once a minute while it fails
  ensure
    Ferrolock.reset_config!
  end

  it "writes a flush as one script on a Redis Cluster too, every key on the {history} slot's master" do
    require_relative "support/redis_cluster"
    cluster = FerrolockTest::RedisCluster.shared
    cluster.flushall
    Ferrolock.configure { |c| c.redis_cluster = cluster.urls }
    %w[a b c].each { |name| Ferrolock::DistMutex.new("history:cluster:#{name}").synchronize { nil } }
    expect(Ferrolock::History.flush!).to be > 0
    %w[a b c].each do |name|
      expect(admin.stats("history:cluster:#{name}",
                         since: 60)[:primitives]["dist_mutex"][:counts]).to eq(one_hold)
    end
    holding = cluster.masters.select { |server| server.redis.call("KEYS", "ferrolock:{history}:*").any? }
    expect(holding.size).to eq(1)
  ensure
    Ferrolock.configure { |c| c.redis_cluster = nil }
  end

  it "rejects a bad since" do
    expect { admin.stats("x", since: "2w") }.to raise_error(ArgumentError, /since: expected a number/)
    expect { admin.stats("x", since: 73 * 3600) }.to raise_error(ArgumentError, /between 1 second and 72 hours/)
    expect { admin.stats("x", since: 1.5) }.to raise_error(TypeError, /since must be an Integer/)
  end
end
