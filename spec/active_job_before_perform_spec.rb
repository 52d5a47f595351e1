# frozen_string_literal: true

require "logger"
require_relative "support/active_job_jobs"
require_relative "support/poison_records"

# A job that fails before it performs (Ferrolock::ActiveJob::BeforePerform): a record deleted while it
# waited (ActiveJob::DeserializationError), a class this worker lacks (NameError), an error handled
# (discard_on) before the perform callbacks. Its slots go back at once and its parked payload goes: it
# is never promoted again, and the next blocked job is promoted by that failure. In this process on
# :test (run here as a worker: ActiveJob::Base.execute) and :async; real Sidekiq processes:
# spec/active_job_before_perform_processes_spec.rb.
RSpec.describe "ActiveJob: a job that fails before it performs", time_limit: 30 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:log) { StringIO.new }
  let(:events) { [] }

  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  include FerrolockTest::ActiveJobJobs

  around do |example|
    subscription = Ferrolock.subscribe(:failed_before_perform) { |_, payload| events << payload }
    with_loggers(ferrolock: Logger.new(log)) { example.run }
  ensure
    Ferrolock.unsubscribe(subscription)
  end

  def slots(key) = redis.zrange("ferrolock:{concurrency:#{key}}:slots", 0, -1)

  def parked(key) = redis.hkeys("ferrolock:{concurrency:#{key}}:jobs") - ["{limit}"]

  # A job class keyed on its record, recording the record's id when it performs.
  def record_job(name, **limits, &body)
    job_class(name, **limits) do
      define_method(:perform) { |record| LC_RAN << record.id }
      class_eval(&body) if body
    end
  end

  def failing_run(klass, error)
    expect { run_queued(klass) }.to raise_error(error)
  end

  it "a blocked job whose record was deleted: fails once, frees its slot at once, the next runs; nothing loops" do
    klass = record_job("BpBlockedJob", to: 1, key: ->(_record) { "k" }, duration: 1)
    records = Array.new(3) { |n| LcRecord.create("bp#{n}") }
    jobs = records.map { |record| klass.perform_later(record) }
    records[1].destroy # deleted while its job waits in the line
    run_queued(klass) # 0 runs; its release promotes 1
    expect(queue(klass).map { |job| job["job_id"] }).to eq([jobs[1].job_id])
    failing_run(klass, ActiveJob::DeserializationError)
    # Its failure gave its slot back and promoted 2 then: no wait for its lease (1 s).
    expect(slots("BpBlockedJob/k")).to eq([jobs[2].job_id])
    expect(queue(klass).map { |job| job["job_id"] }).to eq([jobs[2].job_id])
    expect(parked("BpBlockedJob/k")).to eq([jobs[2].job_id]) # 1's payload is gone
    expect(events).to contain_exactly(include(primitive: :limits_concurrency, name: "BpBlockedJob/k",
                                              job_class: "BpBlockedJob", job_id: jobs[1].job_id, gave_back: true,
                                              error: "ActiveJob::DeserializationError"))
    expect(log.string).to include("BpBlockedJob #{jobs[1].job_id} failed before it performed " \
                                  "(ActiveJob::DeserializationError")
    work_off(klass)
    expect(ran).to eq(%w[bp0 bp2])
    # Three leases later it has not come back (before, it was promoted again every `duration`).
    sleep 3
    expect(queue(klass)).to be_empty
    expect(LcRecord.finds("bp1")).to eq(1)
    expect(slots("BpBlockedJob/k") + parked("BpBlockedJob/k")).to be_empty
  end

  it "a job admitted at enqueue whose record was deleted gives its slot back as it fails" do
    klass = record_job("BpAdmittedJob", to: 1, key: ->(_record) { "k" }, duration: 60)
    record = LcRecord.create("bp-admitted")
    job = klass.perform_later(record)
    record.destroy
    failing_run(klass, ActiveJob::DeserializationError)
    expect(slots("BpAdmittedJob/k")).to be_empty # not held for its 60 s lease
    expect(events.map { |e| e.values_at(:job_id, :gave_back) }).to eq([[job.job_id, true]])
    expect(klass.perform_later(LcRecord.create("bp-next"))).to be_a(klass)
    expect(queue(klass).size).to eq(1) # admitted, not blocked
  end

  it "a job whose class this worker lacks (NameError) gives its slot back and promotes the next" do
    klass = record_job("BpMissingJob", to: 1, key: ->(_record) { "k" }, duration: 60)
    first = klass.perform_later(LcRecord.create("bp-m0"))
    second = klass.perform_later(LcRecord.create("bp-m1"))
    queue(klass).first["job_class"] = "BpNoSuchJob" # a worker deployed without this class
    failing_run(klass, NameError)
    expect(slots("BpMissingJob/k")).to eq([second.job_id])
    # (ActiveJob 8.1 raises its UnknownJobClassError, a NameError)
    expect(events.map { |e| e.values_at(:job_id, :job_class, :error) }).to match(
      [[first.job_id, "BpNoSuchJob", match(/\A(NameError|ActiveJob::UnknownJobClassError)\z/)]]
    )
    work_off(klass)
    expect(ran).to eq(%w[bp-m1])
  end

  it "a job whose DeserializationError is discarded (discard_on) before its perform: the slot goes back too" do
    klass = record_job("BpDiscardOnJob", to: 1, key: ->(_record) { "k" }, duration: 60) do
      discard_on ActiveJob::DeserializationError
    end
    gone = LcRecord.create("bp-d0")
    klass.perform_later(gone)
    waiting = klass.perform_later(LcRecord.create("bp-d1"))
    gone.destroy
    run_queued(klass) # discarded: no error comes out
    expect(slots("BpDiscardOnJob/k")).to eq([waiting.job_id])
    expect(events).to contain_exactly(include(error: nil, reason: include("its perform never began")))
    work_off(klass)
    expect(ran).to eq(%w[bp-d1])
  end

  it "concurrency_rule: the enqueue_limit and total_limit places of a job that fails before it performs go back" do
    klass = record_job("BpRuleJob") do
      concurrency_rule key: "k", enqueue_limit: 1, duration: 60
      concurrency_rule key: "k", total_limit: 1, duration: 60
    end
    gone = LcRecord.create("bp-r0")
    klass.perform_later(gone)
    expect(klass.perform_later(LcRecord.create("bp-r1"))).to be(false) # both places taken
    gone.destroy
    failing_run(klass, ActiveJob::DeserializationError)
    expect(slots("rule:queued:BpRuleJob/k") + slots("rule:total:BpRuleJob/k")).to be_empty
    expect(events.map { |e| e.values_at(:primitive, :name) }).to contain_exactly(
      [:concurrency_rule, "rule:queued:BpRuleJob/k"], [:concurrency_rule, "rule:total:BpRuleJob/k"]
    )
    expect(klass.perform_later(LcRecord.create("bp-r2"))).to be_a(klass)
    work_off(klass)
    expect(ran).to eq(%w[bp-r2])
  end

  it "a job perform_all_later (7.1+) admitted, whose record was deleted, gives its slot back as it fails" do
    skip "ActiveJob #{ActiveJob.version} has no perform_all_later" unless ActiveJob.respond_to?(:perform_all_later)

    klass = record_job("BpBulkJob", to: 1, key: ->(_record) { "k" }, duration: 60)
    gone = LcRecord.create("bp-b0")
    jobs = [klass.new(gone), klass.new(LcRecord.create("bp-b1"))]
    ActiveJob.perform_all_later(jobs)
    gone.destroy
    failing_run(klass, ActiveJob::DeserializationError)
    expect(slots("BpBulkJob/k")).to eq([jobs[1].job_id]) # promoted by that failure
    work_off(klass)
    expect(ran).to eq(%w[bp-b1])
  end

  it "a job that performs is not reported, and a job that raises in perform gives its slot back as before" do
    klass = job_class("BpPerformsJob", to: 1, key: ->(_num) { "k" }, duration: 60) do
      def perform(num) = num.zero? ? raise(IOError, "in perform") : LC_RAN << num
    end
    klass.perform_later(0)
    klass.perform_later(1)
    expect { run_queued(klass) }.to raise_error(IOError)
    work_off(klass)
    expect(ran).to eq([1])
    expect(events).to be_empty
    expect(slots("BpPerformsJob/k")).to be_empty
  end

  it "on :async: the poison job fails once and the jobs behind it run at once" do
    klass = record_job("BpAsyncJob", adapter: ActiveJob::QueueAdapters::AsyncAdapter.new(min_threads: 2,
                                                                                         max_threads: 2),
                                     to: 1, key: ->(_record) { "k" }, duration: 1) do
      def perform(record)
        sleep 0.2 if record.id == "bp-a0" # the others are blocked behind it meanwhile
        LC_RAN << record.id
      end
    end
    records = Array.new(4) { |n| LcRecord.create("bp-a#{n}") }
    records.each { |record| klass.perform_later(record) }
    records[1].destroy
    wait_until(timeout: 10, interval: 0.01, what: "the three good jobs") { LC_RAN.size == 3 }
    expect(ran).to eq(%w[bp-a0 bp-a2 bp-a3])
    sleep 2.5 # two leases: the poison job is not promoted again
    expect(LcRecord.finds("bp-a1")).to eq(1)
    expect(LC_RAN).to be_empty
    expect(events.map { |e| e[:error] }).to eq(["ActiveJob::DeserializationError"])
  end
end
