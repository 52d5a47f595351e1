# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"
require_relative "fixtures/uniqueness_app"

# ActiveJob::Uniqueness (activejob-uniqueness' API) and the dual_lock macro with real Sidekiq processes
# (spec/fixtures/uniqueness_app.rb: ActiveJob on Sidekiq's adapter, no ferrolock middleware) and the test
# redis-server. This process enqueues; the jobs count in Redis what ran and how many at once.
RSpec.describe "ActiveJob::Uniqueness and dual_lock in Sidekiq processes", time_limit: 120 do
  let(:app) { "spec/fixtures/uniqueness_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }

  around do |example|
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
    ActiveJob::Uniqueness.reset_manager!
    example.run
  end

  def sidekiq(**options) = FerrolockTest::SidekiqProcess.new(app, queues: %w[default], **options)

  def with_processes(*processes)
    processes.map { |process| Thread.new { process.start(boot_timeout: 40) } }.each(&:join)
    yield(*processes)
  ensure
    processes.each(&:stop)
  end

  def done(key) = redis.lrange("uq:done", 0, -1).count { |line| line.start_with?("#{key} ") }
  def started(key) = redis.lrange("uq:started", 0, -1).count { |line| line.start_with?("#{key} ") }

  it "until_executed: 300 perform_later of one job, two processes; one queued or running at a time, each ran once" do
    with_processes(sidekiq(concurrency: 5), sidekiq(concurrency: 5)) do |*processes|
      enqueued = 0
      300.times do |num|
        enqueued += 1 if UqExecutedJob.perform_later(1, num)
        sleep 0.005
      end
      wait_until(timeout: 60, what: -> { "#{enqueued} done (#{done("executed1")})\n#{processes.map(&:log).join}" }) do
        done("executed1") >= enqueued && redis.keys("activejob_uniqueness:*").empty?
      end
      expect(enqueued).to be_between(2, 299)
      expect(done("executed1")).to eq(enqueued)
      expect(redis.get("uq:max:executed1")).to eq("1")
    end
  end

  it "until_executed with retry_on: the retry keeps the job's own lock (a duplicate is refused), then frees it" do
    with_processes(sidekiq(concurrency: 2)) do |process|
      job = UqRetryJob.perform_later(7)
      key = job.lock_key
      wait_until(timeout: 30, what: lambda {
                                      "the retry scheduled\n#{process.log}"
                                    }) { Sidekiq::ScheduledSet.new.size == 1 }
      expect(redis.get(key)).to eq(job.job_id)
      expect(UqRetryJob.perform_later(7)).to be(false)
      wait_until(timeout: 30, what: lambda {
                                      "the retry done\n#{process.log}"
                                    }) { done("retry7") == 2 && redis.get(key).nil? }
      expect(UqRetryJob.perform_later(7)).to be_a(UqRetryJob)
    end
  end

  it "until_executed: a job longer than lock_ttl (1 s) keeps its lock while it runs; kill -9 frees it within a lease" do
    with_processes(sidekiq(concurrency: 2)) do |process|
      job = UqLongJob.perform_later(9, 30)
      wait_until(timeout: 30, what: -> { "the job started\n#{process.log}" }) { started("long9") == 1 }
      sleep 2.5 # past lock_ttl
      expect(redis.get(job.lock_key)).to eq(job.job_id)
      expect(UqLongJob.perform_later(9, 0)).to be(false)
      expect(redis.pttl(job.lock_key)).to be_between(1, 1000) # the lease: min(lock_ttl, config.lease)
      Process.kill("KILL", process.pid)
      wait_until(timeout: 5, what: "the lock freed") { redis.get(job.lock_key).nil? }
    end
  end

  it "while_executing: 40 duplicates over two processes, never two at once" do
    with_processes(sidekiq(concurrency: 5), sidekiq(concurrency: 5)) do |*processes|
      40.times { |num| UqWhileJob.perform_later(3, num) }
      wait_until(timeout: 60, what: -> { "the queue drained\n#{processes.map(&:log).join}" }) do
        runs = started("while3")
        Sidekiq::Queue.new("default").size.zero? && runs.positive? && runs == done("while3") &&
          redis.get("uq:now:while3") == "0"
      end
      expect(redis.get("uq:max:while3")).to eq("1")
      expect(done("while3")).to be_between(1, 40)
      # The last run's lock is released just after its perform counted it done.
      wait_until(timeout: 5, what: -> { redis.keys("activejob_uniqueness:*").inspect }) do
        redis.keys("activejob_uniqueness:*").empty?
      end
    end
  end

  it "dual_lock: one runs, one waits and always runs after it, the rest are skipped, over two processes" do
    with_processes(sidekiq(concurrency: 5), sidekiq(concurrency: 5)) do |*processes|
      UqDualJob.perform_later(4, 0, 1.5)
      wait_until(timeout: 30, what: "the first started") { started("dual4") == 1 }
      8.times { |num| UqDualJob.perform_later(4, num + 1, 0.1) }
      wait_until(timeout: 60, what: -> { "the queue drained\n#{processes.map(&:log).join}" }) do
        Sidekiq::Queue.new("default").size.zero? && done("dual4") >= 2 && redis.get("uq:now:dual4") == "0"
      end
      sleep 1 # (a third run would start by now)
      expect(done("dual4")).to eq(2)
      expect(redis.get("uq:max:dual4")).to eq("1")
    end
  end
end

# require "active_job/uniqueness/sidekiq_patch" (the old gem's path): deleting a job through Sidekiq's API,
# or its death, frees its locks. In a child process, so the prepends stay out of this one.
RSpec.describe "ActiveJob::Uniqueness' Sidekiq patch", time_limit: 60 do
  it "frees a job's lock when Sidekiq's API deletes it from a queue or a set, and when it dies" do
    out = run_ruby!(<<~RUBY)
      require "sidekiq"
      require "sidekiq/api"
      require_relative #{File.join(FerrolockTest::ROOT, "spec/support/sidekiq_active_job").dump}
      require "active_job/uniqueness/sidekiq_patch"
      Sidekiq.configure_client { |c| c.redis = { url: ENV.fetch("REDIS_URL") } }
      ActiveJob::Base.queue_adapter = :sidekiq
      ActiveJob::Base.logger = Logger.new(nil)
      class PatchJob < ActiveJob::Base
        unique :until_executed
        def perform(*) = nil
      end
      redis = Ferrolock.client
      locks = -> { redis.call("KEYS", "activejob_uniqueness:*").size }
      seen = []
      PatchJob.perform_later(1)
      PatchJob.perform_later(2)
      seen << locks.call
      Sidekiq::Queue.new("default").find { |job| job.args.first["arguments"] == [1] }.delete
      seen << locks.call
      Sidekiq::Queue.new("default").clear
      seen << locks.call
      PatchJob.set(wait: 600).perform_later(3)
      seen << locks.call
      Sidekiq::ScheduledSet.new.first.delete
      seen << locks.call
      PatchJob.perform_later(4)
      payload = Sidekiq::Queue.new("default").first.item
      handlers = Sidekiq.respond_to?(:default_configuration) ? Sidekiq.default_configuration.death_handlers : Sidekiq.death_handlers
      handlers.each { |handler| handler.call(payload, RuntimeError.new("died")) }
      seen << locks.call
      puts seen.inspect
    RUBY
    expect(out.lines.last.chomp).to eq("[2, 1, 0, 1, 0, 0]")
  end
end
