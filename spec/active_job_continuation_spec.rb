# frozen_string_literal: true

require "json"
require "sidekiq"
require "sidekiq/api"

# Rails 8.1 job continuations (ActiveJob::Continuable) on real Sidekiq 8.1 processes with the README's
# middlewares (spec/fixtures/continuation_app.rb). An interrupted job enqueues itself again (same
# ActiveJob job_id, new jid) and goes on from its cursor: every ferrolock part treats that as the same job
# going on. Runs where ActiveJob has continuations: bin/modern's Rails 8.1 lane (FERROLOCK_RAILS=8.1).
RSpec.describe "Rails 8.1 job continuations on Sidekiq", time_limit: 240 do
  let(:app) { "spec/fixtures/continuation_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }
  let(:items) { 12 }
  let(:walkers) do
    %w[ContUntilExecutedJob ContUntilExecutingJob ContWhileExecutingJob ContUntilAndWhileExecutingJob
       ContUntilExpiredJob ContDualLockJob ContLimitedJob ContFairTenantJob ContFairBoundedJob]
  end

  before do
    skip "ActiveJob #{ActiveJob.version} has no continuations (FERROLOCK_RAILS=8.1 runs them)" unless continuations?
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
  end

  def continuations?
    out, = Open3.capture2e({ "RUBYLIB" => FerrolockTest::SidekiqVersion.rubylib }, RbConfig.ruby, "-e",
                           'require "active_job"; print defined?(ActiveJob::Continuable) ? 1 : 0')
    out.end_with?("1")
  end

  # Enqueues through the app's client middlewares; returns each perform_later's [job_id, jid] (nil: refused).
  def enqueue(code, env: {})
    out = run_ruby!(<<~RUBY, timeout: 60, env: env)
      require #{File.join(FerrolockTest::ROOT, app).dump}
      jobs = (#{code})
      puts JSON.generate(jobs.map { |job| job ? [job.job_id, job.provider_job_id] : nil })
    RUBY
    JSON.parse(out.lines.last)
  end

  def done = redis.lrange("done", 0, -1).map(&:split)

  def done_by(name) = done.select { |klass, _| klass == name }.map { |_, item| Integer(item) }

  def queued = Sidekiq::Queue.all.flat_map(&:to_a) + Sidekiq::ScheduledSet.new.to_a

  def job_id(entry) = entry.item["args"].first["job_id"]

  def sidekiq(**options) = FerrolockTest::SidekiqProcess.new(app, concurrency: 10, queues: %w[default slow], **options)

  it "resumes every lock type, DualLock, the limiter and FairTenant after a TERM, each item once" do
    started = enqueue("#{walkers.inspect}.map { |name| Object.const_get(name).perform_later(1) }")
    expect(started).to all(be_a(Array))
    job_ids = started.map(&:first)

    first = sidekiq(shutdown_timeout: 10).start
    begin
      wait_until(timeout: 60, interval: 0.05, what: "two items of each job") do
        walkers.all? { |c| done_by(c).size >= 2 }
      end
    ensure
      first.stop # TERM: Sidekiq quiets, adapter.stopping? turns true, each job stops at its next checkpoint
    end
    log = first.log
    expect(walkers.map { |c| done_by(c).size }).to all(be < items), log

    # Each job enqueued itself again, under a new jid; nothing failed, nothing was refused.
    waiting = queued
    expect(waiting.map { |entry| job_id(entry) }).to match_array(job_ids), log
    expect(waiting.map(&:jid) & started.map(&:last)).to be_empty
    expect(Sidekiq::RetrySet.new.size + Sidekiq::DeadSet.new.size).to eq(0), log
    expect(log).not_to include("push skipped", "halted")
    # The until_executed and until_expired locks went with them: a duplicate is still refused.
    %w[ContUntilExecutedJob ContUntilExpiredJob].each do |name|
      resumed = waiting.find { |entry| entry.item["wrapped"] == name }.jid
      expect(admin.uniques(name).items.map(&:jid)).to eq([resumed]), "#{name}: #{log}"
    end
    expect(enqueue("[ContUntilExecutedJob.perform_later(1), ContUntilExpiredJob.perform_later(1)]")).to eq([nil, nil])
    # DualLock and the limiter hold nothing while the jobs wait to resume.
    expect(admin.locks("*").items.select(&:held?)).to be_empty
    expect(admin.limiters("cont-limit").items.sum(&:in_use)).to eq(0)

    second = sidekiq.start
    begin
      wait_until(timeout: 90, interval: 0.05, what: "every item") do
        walkers.all? { |c| done_by(c).size >= items } && queued.empty?
      end
      sleep 0.5 # the last jobs' server middlewares release after their last item
    ensure
      second.stop
    end
    log += second.log
    walkers.each { |c| expect(done_by(c).sort).to eq((0...items).to_a), "#{c}: #{done_by(c)}\n#{log}" }
    expect(Sidekiq::RetrySet.new.size + Sidekiq::DeadSet.new.size).to eq(0), log
    expect(admin.uniques("ContUntilExecutedJob").items).to be_empty
    expect(admin.locks("*").items.select(&:held?)).to be_empty
    # FairTenant counted the job once (by its job_id), though it was pushed twice.
    expect(redis.zcard(Ferrolock::FairTenant.key("ContFairTenantJob", "tenant-1"))).to eq(1)
    bounded = Ferrolock::FairTenant.key("ContFairBoundedJob", "tenant-1", mode: :bounded)
    # (The hour of Redis' clock turning moves the count to the previous bucket: read both.)
    expect(redis.hmget(bounded, "c3600000", "p3600000").sum(&:to_i)).to eq(1), redis.hgetall(bounded).inspect
    expect(enqueue("[ContUntilExecutedJob.perform_later(1)]")).to all(be_a(Array))
  end

  it "runs an isolated step in an execution of its own, with no shutdown, keeping the until_executed lock" do
    job_id, = enqueue("[ContIsolatedJob.perform_later]").first
    with_sidekiq(app, concurrency: 2) do |process|
      wait_until(timeout: 60, interval: 0.05, what: "the three steps") { done.size >= 3 && queued.empty? }
      sleep 0.5
      log = process.log
      steps = done.select { |klass, _| klass == "ContIsolatedJob" }
      expect(steps.map { |_, name, _| name }).to eq(%w[prepare slow finish]), log
      # Three executions (jids) of one job: it enqueued itself before and after the isolated step.
      expect(steps.map(&:last).uniq.size).to eq(3), log
      expect(log.scan(/ContIsolatedJob jid=\h+ job_id=#{job_id} resumes \h+: unique lock/).size).to eq(2), log
      expect(admin.uniques("ContIsolatedJob").items).to be_empty
    end
  end

  it "frees every lock within its lease when the process is killed mid-step (kill -9)" do
    # (The lease is in the pushed job too: the enqueuing process must read the same one.)
    env = { "CONTINUATION_ITEM_SLEEP" => "0.5", "CONTINUATION_LEASE" => "4" }
    killed = %w[ContUntilExecutedJob ContDualLockJob ContLimitedJob]
    enqueue("#{killed.inspect}.map { |name| Object.const_get(name).perform_later(2) }", env: env)
    process = sidekiq(env: env).start
    begin
      wait_until(timeout: 60, interval: 0.05, what: "an item of each job") do
        killed.all? { |c| done_by(c).size >= 1 }
      end
      expect(admin.uniques("ContUntilExecutedJob").items.size).to eq(1)
      Process.kill("KILL", -process.pid)
    ensure
      process.stop(timeout: 5)
    end
    killed_at = Ferrolock.monotonic
    # Sidekiq OSS's basic fetch loses a job that was running at kill -9 (Sidekiq Pro's super_fetch brings it
    # back); what ferrolock owes is that nothing it holds outlives its lease (4 s here).
    wait_until(timeout: 30, interval: 0.2, what: "every lock free") do
      admin.uniques("ContUntilExecutedJob").items.empty? && admin.locks("*").items.none?(&:held?) &&
        admin.limiters("cont-limit").items.sum(&:in_use).zero?
    end
    expect(Ferrolock.monotonic - killed_at).to be <= 10
  end
end
