# frozen_string_literal: true

require "logger"
require "active_support/notifications"
require_relative "support/active_job_jobs"

# An enqueue that limits_concurrency or a concurrency_rule refuses is ActiveJob's aborted enqueue on
# 6.1 (host), 7.2 (modern) and 8.1 (FERROLOCK_RAILS=8.1): perform_later false, no "Enqueued" line, the
# enqueue.active_job event `aborted`, (7.1+) successfully_enqueued? false; and perform_all_later (7.1+)
# admits each job as perform_later does, counting a refused one as not enqueued.
RSpec.describe "ActiveJob: a refused enqueue reads as refused", time_limit: 30 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:active_job_log) { StringIO.new }
  let(:notifications) { [] }

  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  include FerrolockTest::ActiveJobJobs

  around do |example|
    subscriber = ActiveSupport::Notifications.subscribe(/\Aenqueue(_all)?\.active_job\z/) do |name, *, payload|
      notifications << [name, payload]
    end
    with_loggers(active_job: Logger.new(active_job_log)) { example.run }
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber)
  end

  # Each way an enqueue is refused: [limits, rules, how many enqueues pass before the refused one].
  refusals = {
    "on_conflict: :discard" => [{ to: 1, key: "k", on_conflict: :discard }, [], 1],
    "max_blocked: with on_max_blocked: :discard" => [{ to: 1, key: "k", max_blocked: 1, on_max_blocked: :discard },
                                                     [], 2],
    "concurrency_rule enqueue_limit:" => [{}, [{ key: "k", enqueue_limit: 1 }], 1],
    "concurrency_rule total_limit:" => [{}, [{ key: "k", total_limit: 1 }], 1],
    "concurrency_rule enqueue_throttle:" => [{}, [{ key: "k", enqueue_throttle: [1, :minute] }], 1]
  }

  def refusing_class(name, limits, rules)
    job_class(name, **limits) do
      rules.each { |rule| concurrency_rule(**rule) }
      define_method(:perform) { |_num| nil }
    end
  end

  def enqueue_events(job)
    notifications.select { |name, payload| name == "enqueue.active_job" && payload[:job] == job }
  end

  refusals.each_with_index do |(what, (limits, rules, passing)), index|
    it "#{what}: perform_later is false, enqueue.active_job aborted, no \"Enqueued\" line" do
      klass = refusing_class("RfJob#{index}", limits, rules)
      accepted = Array.new(passing) { |num| klass.new(num).tap(&:enqueue) }
      refused = klass.new(99)
      expect(refused.enqueue).to be(false)
      expect(enqueue_events(refused).map { |_, payload| payload[:aborted] }).to eq([true])
      expect(accepted.flat_map { |job| enqueue_events(job).map { |_, payload| payload[:aborted] } }).to all(be_falsey)
      expect(active_job_log.string).not_to include("Enqueued RfJob#{index} (Job ID: #{refused.job_id})")
      expect(active_job_log.string).to include("Failed enqueuing RfJob#{index}")
      expect(refused.successfully_enqueued?).to be(false) if refused.respond_to?(:successfully_enqueued?)
      expect(klass.perform_later(100)).to be(false)
    end

    it "#{what}: perform_all_later (7.1+) admits each job as perform_later does, a refused one not enqueued" do
      skip "ActiveJob #{ActiveJob.version} has no perform_all_later" unless ActiveJob.respond_to?(:perform_all_later)

      klass = refusing_class("RfAllJob#{index}", limits, rules)
      accepted = Array.new(passing) { |num| klass.new(num) }
      refused = klass.new(99)
      expect(ActiveJob.perform_all_later(*accepted, refused)).to be_nil
      expect(accepted.map(&:successfully_enqueued?)).to all(be(true))
      expect([refused.successfully_enqueued?, refused.enqueue_error]).to match(
        [false, be_a(Ferrolock::ActiveJob::EnqueueAll::Refused)]
      )
      counted = notifications.select { |name, _| name == "enqueue_all.active_job" }
      expect(counted.sum { |_, payload| payload[:enqueued_count] }).to eq(passing)
      expect(counted.flat_map { |_, payload| payload[:jobs] }).not_to include(refused)
    end
  end

  it "a job limits_concurrency refuses after a concurrency_rule gave it a place gives the place back" do
    klass = refusing_class("RfBothJob", { to: 1, key: "k", on_conflict: :discard }, [{ key: "k", enqueue_limit: 5 }])
    expect(klass.perform_later(0)).to be_a(klass)
    expect(klass.perform_later(1)).to be(false)
    expect(redis.zcard("ferrolock:{concurrency:rule:queued:RfBothJob/k}:slots")).to eq(1)
    next unless ActiveJob.respond_to?(:perform_all_later)

    jobs = [klass.new(2), klass.new(3)]
    ActiveJob.perform_all_later(jobs)
    expect(jobs.map(&:successfully_enqueued?)).to eq([false, false])
    expect(redis.zcard("ferrolock:{concurrency:rule:queued:RfBothJob/k}:slots")).to eq(1)
  end

  describe "perform_all_later (7.1+)" do
    before do
      skip "ActiveJob #{ActiveJob.version} has no perform_all_later" unless ActiveJob.respond_to?(:perform_all_later)
    end

    it "holds to: with limits_concurrency: the jobs over it are parked, and promoted FIFO as slots free" do
      klass = recording("RfBulkJob", to: 2, key: ->(account, _num) { account })
      jobs = Array.new(5) { |num| klass.new("a", num) } << klass.new("b", 0)
      ActiveJob.perform_all_later(jobs)
      expect(jobs.map(&:successfully_enqueued?)).to all(be(true)) # parked ones are stored: enqueued
      expect(queue(klass).map { |job| job["arguments"] }).to eq([["a", 0], ["a", 1], ["b", 0]])
      expect(redis.lrange("ferrolock:{concurrency:RfBulkJob/a}:blocked", 0, -1)).to eq(jobs[2, 3].map(&:job_id))
      work_off(klass)
      expect(ran.map { |account, num, _| [account, num] }).to eq([["a", 0], ["a", 1], ["b", 0], ["a", 2], ["a", 3],
                                                                  ["a", 4]])
    end

    it "gives back the slot of a job its adapter reports not enqueued (enqueue_error)" do
      refusing = stub_const("RfRefusingAdapter", Class.new do
        def enqueue(_job) = raise(ActiveJob::EnqueueError, "queue full")
        def enqueue_at(job, _timestamp) = enqueue(job)
      end)
      klass = recording("RfBulkFailsJob", to: 1, key: ->(account, _num) { account })
      klass.queue_adapter = refusing.new
      job = klass.new("a", 0)
      ActiveJob.perform_all_later(job)
      expect(job.enqueue_error).to be_a(ActiveJob::EnqueueError)
      expect(redis.exists?("ferrolock:{concurrency:RfBulkFailsJob/a}:slots")).to be(false)
      klass.queue_adapter = :test
      expect(klass.perform_later("a", 1)).to be_a(klass)
      expect(queue(klass).size).to eq(1) # not blocked behind a slot nobody holds
    end
  end
end
