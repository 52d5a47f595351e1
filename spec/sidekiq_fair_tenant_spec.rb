# frozen_string_literal: true

require "json"
require "sidekiq"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
require_relative "fixtures/fair_tenant_app"

# FairTenant with real `sidekiq` processes: weighted queues, jobs enqueued by jobs, retries and
# scheduled jobs pushed again by Sidekiq itself, and the boot-time queue check.
RSpec.describe Ferrolock::FairTenant::ClientMiddleware, "in a Sidekiq process" do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:app) { "spec/fixtures/fair_tenant_app.rb" }
  let(:weighted) { ["default,6", "default_throttled,3", "default_superslow,1"] }

  before do
    Sidekiq.configure_client { |c| c.redis = { url: FerrolockTest.redis_server.url } }
    Ferrolock::FairTenant.reset!
  end

  after { FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.remove(described_class) } }

  def p95(values)
    values.sort[(values.size * 0.95).ceil - 1]
  end

  def enqueue_big_then_small
    2000.times { FtLatencyJob.perform_async("big", Time.now.to_f) }
    5.times { |t| 10.times { FtLatencyJob.perform_async("small-#{t}", Time.now.to_f) } }
  end

  def small_p95(done)
    p95(done.reject { |tenant, _, _| tenant == "big" }.map(&:last))
  end

  # 2,000 jobs of a big tenant, then 10 of each of 5 small tenants, 10 ms each, on one process
  # (concurrency 5, weights 6/3/1). Returns [small tenants' p95 latency, every run record].
  def big_and_small_run(with_middleware:)
    redis.flushdb
    FerrolockTest::SidekiqVersion.client_middleware do |chain|
      with_middleware ? chain.add(described_class) : chain.remove(described_class)
    end
    with_sidekiq(app, concurrency: 5, queues: weighted) do
      enqueue_big_then_small
      wait_until(timeout: 120, interval: 0.1) { redis.llen("ft:done") >= 2050 }
      sleep 0.2 # a duplicate run, if any, would land now
    end
    done = redis.lrange("ft:done", 0, -1).map { |line| JSON.parse(line) }
    [small_p95(done), done]
  end

  it "keeps small tenants fast behind a big tenant's burst (p95 at least 5x lower), each job once" do
    without, plain_runs = big_and_small_run(with_middleware: false)
    with, fair_runs = big_and_small_run(with_middleware: true)
    warn format("\n  FairTenant latency, small tenants p95: %<without>.3f s without, %<with>.3f s with (%<x>.1fx)",
                without: without, with: with, x: without / with)
    [plain_runs, fair_runs].each do |runs|
      expect(runs.size).to eq(2050)
      expect(runs.map { |_, jid, _| jid }.uniq.size).to eq(2050)
    end
    expect(with * 5).to be <= without
  end

  it "reroutes jobs enqueued from inside a job" do
    with_sidekiq(app, concurrency: 2, queues: weighted) do
      FtParentJob.perform_async("acme", 5)
      wait_until(timeout: 20) { redis.llen("queue:ft_parked") + redis.llen("queue:ft_parked_slow") >= 5 }
    end
    expect([redis.llen("queue:ft_parked"), redis.llen("queue:ft_parked_slow")]).to eq([2, 3])
    expect(redis.zcard(Ferrolock::FairTenant.key("FtChildJob", "acme"))).to eq(5)
  end

  it "counts a job once although Sidekiq pushes it again for its retry or its schedule" do
    FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.add(described_class) }
    jobs = [FtRetryJob, FtRetryBoundedJob]
    with_sidekiq(app, concurrency: 2, queues: weighted) do
      jobs.each do |job|
        3.times { job.perform_async("r") }
        2.times { job.perform_in(1, "r") }
      end
      wait_until(timeout: 60, interval: 0.1) { redis.llen("ft:retried") >= 10 }
    end
    expect(redis.lrange("ft:retried", 0, -1).uniq.size).to eq(10)
    # Each ran twice (a failure, then its retry) and was pushed 2 or 3 times, yet counted once.
    expect(redis.zcard(Ferrolock::FairTenant.key("FtRetryJob", "r"))).to eq(5)
    # Bounded counts move to the previous bucket when the hour of Redis' clock turns (bounded.lua): a run
    # across it finds them there, and the current bucket at 0.
    bounded = redis.hmget(Ferrolock::FairTenant.key("FtRetryBoundedJob", "r", mode: :bounded), "c3600000", "p3600000")
    expect(bounded.sum(&:to_i)).to eq(5)
  end

  it "warns loudly at boot when a rerouting queue is not fetched, and not otherwise" do
    with_sidekiq(app, concurrency: 1, queues: %w[default default_throttled]) do |sidekiq|
      wait_until(timeout: 10) { sidekiq.log.include?("FtLatencyJob reroutes") }
      expect(sidekiq.log).to include('!!! ferrolock FairTenant: FtLatencyJob reroutes to queue "default_superslow"')
      expect(sidekiq.log).to include('FtChildJob reroutes to queue "ft_parked_slow"')
      expect(sidekiq.log).not_to include('queue "default_throttled", which')
    end
    queues = weighted + ["ft_parked_slow"]
    with_sidekiq(app, concurrency: 1, queues: queues) do |sidekiq|
      sleep 0.5
      expect(sidekiq.log).not_to include("ferrolock FairTenant")
    end
  end
end
