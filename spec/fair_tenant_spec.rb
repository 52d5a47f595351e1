# frozen_string_literal: true

require "timeout"

require "logger"
require "sidekiq"
require "active_support"
require "active_support/core_ext/integer/time"
require "active_job"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

# Jobs for the in-process client chain (the middleware runs where jobs are pushed).
class FtSpecJob
  include Sidekiq::Worker
  sidekiq_options queue: "default", fair_tenant_queues: [
    { threshold: 3, per: 1.hour, queue: "default_throttled" },
    { threshold: 5, per: 60, queue: "default_superslow" }
  ]

  def self.fair_tenant(account, *) = "account-#{account}"

  def perform(*); end
end

class FtSpecBoundedJob
  include Sidekiq::Worker
  sidekiq_options queue: "default", fair_tenant_mode: :bounded,
                  fair_tenant_queues: [{ threshold: 2, per: 60, queue: "slow" }]

  def perform(*); end
end

class FtSpecNoTenantJob
  include Sidekiq::Worker
  sidekiq_options queue: "default", fair_tenant_queues: [{ threshold: 1, per: 60, queue: "slow" }]

  def perform(*); end
end

class FtSpecPlainJob
  include Sidekiq::Worker
  sidekiq_options queue: "default"

  def perform(*); end
end

# What Sidekiq's Rails integration does (sidekiq_options on ActiveJob classes; on 7.3 its wrapper).
require_relative "support/sidekiq_active_job"
require_relative "support/redis_monitor"
ActiveJob::Base.logger = Logger.new(nil)

class FtSpecActiveJob < ActiveJob::Base
  self.queue_adapter = :sidekiq
  queue_as :default
  sidekiq_options fair_tenant_queues: [{ threshold: 2, per: 60, queue: "aj_slow" }]

  def self.fair_tenant(tenant, *) = tenant

  def perform(*); end
end

# A middleware that moves every job first (to check ours leaves such jobs alone).
class FtSpecMover
  def call(_worker, job, _queue, _pool)
    job["queue"] = "moved"
    yield
  end
end

RSpec.describe Ferrolock::FairTenant do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:log) { StringIO.new }
  let(:middleware) { Ferrolock::FairTenant::ClientMiddleware }

  def queue_sizes(*names)
    names.to_h { |name| [name, redis.llen("queue:#{name}")] }
  end

  # FairTenant's commands (its keys hold "{ft:") sent while the block runs, seen through MONITOR:
  # INFO commandstats would also count other work of this process (a lease renewal, a background
  # release left by an earlier example).
  def fair_tenant_commands
    FerrolockTest::RedisMonitor.watch(FerrolockTest.redis_server.url) do |monitor|
      yield
      monitor.lines_until_now.grep(/\{ft:/)
    end
  end

  before do
    Sidekiq.configure_client { |c| c.redis = { url: FerrolockTest.redis_server.url } }
    FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.add middleware }
    Ferrolock.configure { |c| c.logger = Logger.new(log) }
    described_class.reset!
  end

  after do
    FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.remove(middleware) }
    Ferrolock.reset_config!
  end

  describe "routing" do
    it "sends a tenant's jobs to the queue of the LAST rule it breaks, others untouched" do
      8.times { FtSpecJob.perform_async(1) }
      FtSpecJob.perform_async(2)
      expect(queue_sizes("default", "default_throttled", "default_superslow"))
        .to eq("default" => 4, "default_throttled" => 2, "default_superslow" => 3)
      queued = redis.lrange("queue:default_superslow", 0, -1).map { |j| JSON.parse(j) }
      expect(queued.map { |j| j["fair_tenant"] }.uniq).to eq(["account-1"])
      expect(queued.map { |j| j["fair_tenant_origin"] }.uniq).to eq(["default"])
    end

    it "takes the tenant from job['fair_tenant'], then fair_tenant(*args), then job['apartment']" do
      4.times { FtSpecJob.set(fair_tenant: "explicit").perform_async(1) }
      4.times { Sidekiq::Client.push("class" => FtSpecBoundedJob, "args" => [], "apartment" => "apt") }
      expect(redis.exists?(described_class.key("FtSpecJob", "explicit"))).to be(true)
      expect(redis.exists?(described_class.key("FtSpecJob", "account-1"))).to be(false)
      expect(redis.exists?(described_class.key("FtSpecBoundedJob", "apt", mode: :bounded))).to be(true)
      expect(queue_sizes("default_throttled", "slow")).to eq("default_throttled" => 1, "slow" => 2)
    end

    it "counts the same jid once when it is pushed again (retries, scheduled jobs)" do
      # Pushed again by hand: the jid itself is counted once (exact mode).
      payload = { "class" => FtSpecJob, "args" => [1], "jid" => "0123456789abcdef01234567" }
      10.times { Sidekiq::Client.push(payload.dup) }
      expect(redis.zcard(described_class.key("FtSpecJob", "account-1"))).to eq(1)
      expect(queue_sizes("default")).to eq("default" => 10)
    end

    it "does not count a payload already counted at an earlier push (its marker travels with it)" do
      FtSpecBoundedJob.set(fair_tenant: "t").perform_async
      counted = JSON.parse(redis.lpop("queue:default"))
      expect(counted["fair_tenant_counted"]).to be(true)
      5.times { Sidekiq::Client.push(counted.merge("class" => "FtSpecBoundedJob")) }
      expect(redis.hget(described_class.key("FtSpecBoundedJob", "t", mode: :bounded), "c60000")).to eq("1")
      expect(queue_sizes("default")).to eq("default" => 5)
    end

    it "judges a rerouted job pushed again against its original queue" do
      6.times { FtSpecJob.perform_async(1) }
      retried = JSON.parse(redis.lrange("queue:default_superslow", 0, 0).first)
      redis.del(described_class.key("FtSpecJob", "account-1")) # the tenant calmed down
      Sidekiq::Client.push(retried.merge("class" => "FtSpecJob"))
      back = JSON.parse(redis.lrange("queue:default", 0, 0).first)
      expect(back["jid"]).to eq(retried["jid"])
      expect(back).not_to have_key("fair_tenant_origin")
    end

    it "escapes tenants holding braces and colons into one hash tag" do
      4.times { FtSpecJob.set(fair_tenant: "{a}:b").perform_async(1) }
      key = described_class.key("FtSpecJob", "{a}:b")
      expect(key).to eq("ferrolock:{ft:FtSpecJob:%7Ba%7D%3Ab}:z")
      expect(redis.zcard(key)).to eq(4)
    end

    it "publishes :rerouted events" do
      events = []
      subscription = Ferrolock.subscribe(:rerouted) { |_e, payload| events << payload }
      5.times { FtSpecJob.perform_async(7) }
      Ferrolock.unsubscribe(subscription)
      expect(events.size).to eq(2)
      expect(events.first).to include(primitive: :fair_tenant, job_class: "FtSpecJob", tenant: "account-7",
                                      from: "default", queue: "default_throttled")
    end
  end

  describe "jobs it leaves alone" do
    it "makes no Redis call for a job without rules" do
      sent = fair_tenant_commands { 3.times { FtSpecPlainJob.perform_async(1) } }
      expect(sent).to eq([])
      expect(queue_sizes("default")).to eq("default" => 3)
      # The same watch sees a job with rules (so an empty list above means something).
      expect(fair_tenant_commands { FtSpecJob.perform_async(1) }).not_to be_empty
    end

    it "leaves a job another middleware already moved" do
      FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.prepend FtSpecMover }
      sent = fair_tenant_commands { 6.times { FtSpecJob.perform_async(1) } }
      expect(queue_sizes("moved", "default_superslow")).to eq("moved" => 6, "default_superslow" => 0)
      expect(sent).to eq([])
    ensure
      FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.remove(FtSpecMover) }
    end

    it "leaves a job pushed to another queue than its class's: not counted, not rerouted" do
      sent = fair_tenant_commands do
        6.times { FtSpecJob.set(queue: "another").perform_async(1) }
        4.times { FtSpecActiveJob.set(queue: "aj_other").perform_later("acme", 1) }
      end
      expect(queue_sizes("another", "default_throttled", "default_superslow", "aj_other", "aj_slow"))
        .to eq("another" => 6, "default_throttled" => 0, "default_superslow" => 0, "aj_other" => 4, "aj_slow" => 0)
      expect(sent).to eq([])
      # Its class's own queue is still counted, and rerouted past the threshold.
      6.times { FtSpecJob.perform_async(1) }
      expect(queue_sizes("default", "default_superslow")).to eq("default" => 3, "default_superslow" => 1)
    end

    it "pushes a job without a tenant as is, warning once per class" do
      3.times { FtSpecNoTenantJob.perform_async }
      expect(queue_sizes("default", "slow")).to eq("default" => 3, "slow" => 0)
      expect(log.string.scan("FtSpecNoTenantJob has fair_tenant_queues but this job has no tenant").size).to eq(1)
    end
  end

  describe "ActiveJob" do
    it "takes rules and tenant from the wrapped job class" do
      4.times { FtSpecActiveJob.perform_later("acme", 1) }
      FtSpecActiveJob.perform_later("tiny", 1)
      expect(queue_sizes("default", "aj_slow")).to eq("default" => 3, "aj_slow" => 2)
      slow = JSON.parse(redis.lrange("queue:aj_slow", 0, 0).first)
      expect(slow).to include("wrapped" => "FtSpecActiveJob", "fair_tenant" => "acme")
      # Counted by ActiveJob's job_id, which survives ActiveJob's own retries.
      members = redis.zrange(described_class.key("FtSpecActiveJob", "acme"), 0, -1)
      expect(members).to all(start_with("aj:"))
    end
  end

  describe "storage modes" do
    it "uses the bounded mode when the class asks for it, with a fixed size per tenant" do
      50.times { FtSpecBoundedJob.set(fair_tenant: "t").perform_async }
      key = described_class.key("FtSpecBoundedJob", "t", mode: :bounded)
      expect(redis.type(key)).to eq("hash")
      expect(redis.hlen(key)).to eq(3)
      expect(queue_sizes("default", "slow")).to eq("default" => 2, "slow" => 48)
    end

    it "uses the global mode otherwise" do
      Ferrolock.configure { |c| c.fair_tenant_mode = :bounded }
      4.times { FtSpecJob.perform_async(1) }
      expect(redis.type(described_class.key("FtSpecJob", "account-1", mode: :bounded))).to eq("hash")
      expect(redis.exists?(described_class.key("FtSpecJob", "account-1", mode: :exact))).to be(false)
    end

    it "rejects unknown modes naming the setting" do
      expect { Ferrolock.config.fair_tenant_mode = :fast }.to raise_error(ArgumentError, /fair_tenant_mode/)
      expect { Ferrolock.config.fair_tenant_mode = 1 }.to raise_error(TypeError, /fair_tenant_mode/)
      expect { Sidekiq::Client.push("class" => FtSpecJob, "args" => [1], "fair_tenant_mode" => "fast") }
        .to raise_error(ArgumentError, /fair_tenant_mode/)
    end
  end

  describe "bad rules" do
    {
      [{ threshold: 1, per: 60 }] => [ArgumentError, "fair_tenant_queues[0].queue is missing"],
      [{ queue: "q", threshold: 0, per: 60 }] => [ArgumentError, "fair_tenant_queues[0].threshold must be positive"],
      [{ queue: "q", threshold: 1, per: 60 }, { queue: "q", threshold: -2, per: 60 }] =>
        [ArgumentError, "fair_tenant_queues[1].threshold must be positive"],
      [{ queue: "q", threshold: 1.5, per: 60 }] => [TypeError, "fair_tenant_queues[0].threshold must be an Integer"],
      [{ queue: "q", threshold: 1, per: 0 }] => [ArgumentError, "fair_tenant_queues[0].per must be positive"],
      [{ queue: "q", threshold: 1, per: "1h" }] => [TypeError, "fair_tenant_queues[0].per must be a number"],
      [{ queue: 5, threshold: 1, per: 1 }] => [TypeError, "fair_tenant_queues[0].queue must be a String"],
      [{ queue: "q", threshold: 1, per: 1, treshold: 2 }] => [ArgumentError, "fair_tenant_queues[0] has unknown key"],
      ["q"] => [TypeError, "fair_tenant_queues[0] must be a Hash"],
      { queue: "q" } => [TypeError, "fair_tenant_queues must be an Array"]
    }.each do |rules, (error, message)|
      it "raises #{error} at the first push for #{rules.inspect}" do
        klass = Class.new(FtSpecPlainJob) { sidekiq_options fair_tenant_queues: rules }
        stub_const("FtSpecBadJob", klass)
        expect { klass.set(fair_tenant: "t").perform_async }
          .to raise_error(error, /\AFtSpecBadJob: #{Regexp.escape(message)}/)
        expect(queue_sizes("default", "q")).to eq("default" => 0, "q" => 0)
      end
    end

    it "names each option once when the middleware's options are not a Hash" do
      expect { Ferrolock::FairTenant::ClientMiddleware.new(5) }
        .to raise_error(TypeError, "options must be a Hash (client:), got 5")
    end

    it "accepts ActiveSupport::Duration, String keys and a missing per (one day)" do
      rules = Ferrolock::FairTenant::Rules.parse([{ "queue" => :q, "threshold" => 2, "per" => 2.hours },
                                                  { queue: "r", threshold: 1 }])
      expect([rules.queues, rules.pers]).to eq([%w[q r], [7200.0, 86_400.0]])
    end

    it "parses a class's rules once, and keeps a bounded number of parsed Arrays" do
      options = [{ queue: "slow", threshold: 3 }]
      first = Ferrolock::FairTenant::Rules.parse(options)
      expect(Ferrolock::FairTenant::Rules.parse(options)).to be(first)
      # Jobs that went through JSON bring a new Array on every push.
      cache = Ferrolock::FairTenant::Rules.const_get(:CACHE)
      1_000.times { Ferrolock::FairTenant::Rules.parse([{ "queue" => "slow", "threshold" => 3 }]) }
      expect(cache.size).to be <= Ferrolock::FairTenant::Rules.const_get(:CACHE_MAX)
      expect(Ferrolock::FairTenant::Rules.parse(options)).not_to be(first) # pushed out, parsed anew
    end
  end

  describe "when ferrolock's Redis fails" do
    it "pushes to the original queue with a logged warning, then skips Redis for a while" do
      dead = FerrolockTest::RedisServer.new.start
      dead.stop
      Ferrolock.configure { |c| c.redis_url = dead.url }
      6.times { FtSpecJob.perform_async(1) }
      expect(queue_sizes("default", "default_superslow")).to eq("default" => 6, "default_superslow" => 0)
      expect(log.string.scan(/FairTenant: Ferrolock::ConnectionError.*FtSpecJob pushed to "default" unthrottled/).size)
        .to eq(1)
    ensure
      dead&.destroy
    end

    it "costs one read timeout, not one per push, when Redis hangs" do
      hung = FerrolockTest::RedisServer.new.start
      Ferrolock.configure do |c|
        c.redis_url = hung.url
        c.read_timeout = 0.3
      end
      Ferrolock.client.ping
      hung.pause
      took = elapsed { 20.times { FtSpecJob.perform_async(1) } }
      expect(queue_sizes("default")).to eq("default" => 20)
      expect(took).to be < 3.0
      # The read timeout; or, when a signal cut the blocked read short first (seen on Ruby 3.3 in the
      # full suite, where children come and go), "interrupted": one failure either way, then no more reads.
      expect(log.string).to match(/FairTenant: Ferrolock::(ConnectionError|Error: interrupted before Redis answered)/)
    ensure
      hung&.destroy
    end
  end

  describe ".verify!" do
    it "logs loudly each rerouting queue this process does not fetch" do
      problems = described_class.verify!([FtSpecJob, FtSpecPlainJob], queues: %w[default default default_throttled])
      expect(problems.size).to eq(1)
      expect(problems.first).to include('FtSpecJob reroutes to queue "default_superslow"')
      expect(log.string).to include("ERROR").and include("!!! ferrolock FairTenant: FtSpecJob")
      expect { described_class.verify!([FtSpecJob], queues: %w[default], strict: true) }
        .to raise_error(Ferrolock::Error, /default_throttled/)
    end

    it "is quiet when every queue is fetched, and finds the classes with rules itself" do
      all = %w[default default_throttled default_superslow slow aj_slow]
      expect(described_class.verify!(queues: all).grep(/FtSpec/)).to eq([])
      found = described_class.verify!(queues: ["default"]).join
      expect(found).to include("FtSpecBoundedJob").and include("FtSpecActiveJob")
    end

    it "raises on bad rules at boot" do
      bad = Class.new(FtSpecPlainJob) { sidekiq_options fair_tenant_queues: [{ queue: "q", threshold: 0 }] }
      expect { described_class.verify!([bad], queues: ["q"]) }.to raise_error(ArgumentError, /threshold/)
    end
  end
end
