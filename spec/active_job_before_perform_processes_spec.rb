# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"
require_relative "fixtures/before_perform_app"

# A job that fails before it performs, in real Sidekiq processes (spec/fixtures/before_perform_app.rb,
# ActiveJob on Sidekiq's adapter): Sidekiq's JobWrapper runs it through ActiveJob::Base.execute, where
# Ferrolock::ActiveJob::BeforePerform gives its limits_concurrency slot back. (In one process, on :test
# and :async: spec/active_job_before_perform_spec.rb.)
RSpec.describe "ActiveJob: a job that fails before it performs, in Sidekiq processes", time_limit: 90 do
  let(:redis) { FerrolockTest.redis_server.redis }

  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  around do |example|
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
    previous = Ferrolock.config.logger
    Ferrolock.config.logger = Logger.new(nil)
    example.run
  ensure
    Ferrolock.config.logger = previous
  end

  def with_sidekiq(**options)
    process = FerrolockTest::SidekiqProcess.new("spec/fixtures/before_perform_app.rb", queues: %w[default], **options)
    process.start(boot_timeout: 40)
    yield process
  ensure
    process.stop
  end

  # {id => Redis time (µs) it performed}
  def done = redis.lrange("bp:done", 0, -1).to_h { |line| line.split.then { |id, at| [id, Integer(at)] } }

  it "a blocked job whose record was deleted fails once; the next job starts within a second of its failure" do
    records = %w[p0 p1 p2].map { |id| LcRecord.create(id) }
    records[1].destroy # (looked up only when its job runs: as if deleted while p1 waited behind p0)
    with_sidekiq(concurrency: 2) do |sidekiq|
      # Enqueued once Sidekiq runs: a 1 s lease does not cover its boot.
      jobs = records.map { |record| BpPoisonJob.perform_later(record) }
      wait_until(timeout: 30, interval: 0.05, what: -> { "p0 and p2 done: #{done} #{sidekiq.log}" }) do
        done.size == 2
      end
      # Its failure promoted p2 (Redis' clock: the lookup that failed, p2's perform).
      expect(done.keys).to eq(%w[p0 p2])
      expect(done["p2"] - Integer(redis.get("lc:failed_at:p1"))).to be_between(0, 1_000_000)
      sleep 3 # three leases: it is not promoted again (before, once every lease)
      expect(LcRecord.finds("p1")).to eq(1)
      expect(done.size).to eq(2)
      # What happens to it now is Sidekiq's: its retry, as for any failed job.
      expect(Sidekiq::RetrySet.new.map { |entry| entry.args.first["job_id"] }).to eq([jobs[1].job_id])
      expect(sidekiq.log).to include("failed before it performed (ActiveJob::DeserializationError")
    end
    expect(redis.keys("ferrolock:{concurrency:bp/poison}:*") - ["ferrolock:{concurrency:bp/poison}:fence"]).to be_empty
  end

  it "concurrency_rule total_limit: the place of a job whose record was deleted is given back as it fails" do
    gone = LcRecord.create("r0")
    gone.destroy
    # Both before Sidekiq runs: a worker already running could fail r0's job, giving its place back,
    # before the second enqueue (ci33, a busy machine).
    BpRuleJob.perform_later(gone) # takes the one place (60 s, longer than Sidekiq's boot)
    expect(BpRuleJob.perform_later(LcRecord.create("r-refused"))).to be(false)
    with_sidekiq(concurrency: 1) do |sidekiq|
      wait_until(timeout: 30, interval: 0.05, what: -> { "r0's place given back: #{sidekiq.log}" }) do
        !redis.exists?("ferrolock:{concurrency:rule:total:BpRuleJob/rule}:slots")
      end
      expect(BpRuleJob.perform_later(LcRecord.create("r1"))).to be_a(BpRuleJob)
      wait_until(timeout: 30, interval: 0.05, what: -> { "r1 done: #{done} #{sidekiq.log}" }) { done.key?("r1") }
      expect(sidekiq.log).to include("failed before it performed (ActiveJob::DeserializationError")
    end
  end

  it "Sidekiq uniqueness (until_executed): the lock of a job whose record was deleted is released as it fails" do
    middleware = Ferrolock::Sidekiq::Unique::ClientMiddleware
    FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.add middleware }
    record = LcRecord.create("u0")
    record.destroy
    locked = -> { Ferrolock::Admin.new.uniques("BpUniqueJob").items.map(&:jid) }
    # Both before Sidekiq runs: a worker already running could fail u0's job, releasing its lock,
    # before the duplicate's push (ci52, a busy machine).
    BpUniqueJob.perform_later(record)
    expect(BpUniqueJob.perform_later(record)).to be(false) # a duplicate while it waits
    with_sidekiq(concurrency: 1) do |sidekiq|
      wait_until(timeout: 30, interval: 0.05, what: lambda {
                                                      "u0 failed: #{sidekiq.log}"
                                                    }) { redis.exists?("lc:failed_at:u0") }
      # Not kept for its retries (each fails alike): a new push is taken.
      wait_until(timeout: 5, interval: 0.05, what: -> { "the lock released: #{locked.call} #{sidekiq.log}" }) do
        locked.call.empty?
      end
      expect(sidekiq.log).to match(/BpUniqueJob .*failed before it performed \(ActiveJob::DeserializationError/)
    end
    expect(BpUniqueJob.perform_later(record)).to be_a(BpUniqueJob)
  ensure
    FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.remove(middleware) }
  end

  it "a job whose class the worker lacks (NameError) gives its slot back at once, and the job behind it runs" do
    gone = Class.new(LcApplicationJob) do
      limits_concurrency to: 1, key: ->(_record) { "poison" }, group: "bp", duration: 60
      def perform(_record) = nil
    end
    stub_const("BpGoneJob", gone) # defined here only: the Sidekiq process has no such class
    holder = BpGoneJob.perform_later(LcRecord.create("g0"))
    BpPoisonJob.perform_later(LcRecord.create("p-next")) # blocked behind it
    with_sidekiq(concurrency: 1) do |sidekiq|
      wait_until(timeout: 30, interval: 0.05, what: -> { "p-next done: #{done} #{sidekiq.log}" }) { done.size == 1 }
      expect(sidekiq.log).to match(/BpGoneJob #{holder.job_id} failed before it performed \((NameError|\S+UnknownJob)/)
    end
    expect(done.keys).to eq(%w[p-next]) # not after the 60 s lease
  end
end
