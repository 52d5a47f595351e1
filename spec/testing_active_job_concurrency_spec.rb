# frozen_string_literal: true

require "active_support/testing/time_helpers"
require "logger"
require_relative "support/active_job_jobs"
require_relative "support/testing_scenarios"

# ActiveJob's :test adapter run by hand in `mode`, ferrolock's log in `log`; no timer outlives its
# example (nor the fake store's or Redis' state it reads).
RSpec.shared_context "jobs in a ferrolock testing mode" do |mode|
  include FerrolockTest::ActiveJobJobs

  around { |example| FerrolockTest::TestingModes.around(example, mode) }

  let(:log) { StringIO.new }

  before do
    # In fake mode ferrolock's Redis is a closed port: a call reaching it would fail the example.
    dead = "redis://127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0"
    Ferrolock.configure { |c| c.redis_url = dead } if mode == :fake
    @previous_loggers = [ActiveJob::Base.logger, Ferrolock.config.logger]
    ActiveJob::Base.logger = Logger.new(nil)
    Ferrolock.config.logger = Logger.new(log)
    LC_RAN.clear
  end

  after do
    ActiveJob::Base.logger, Ferrolock.config.logger = @previous_loggers
    Ferrolock::ActiveJob::Slots.reset!
  end

  def queued(klass) = queue(klass).map { |job| job["arguments"] || job[:args] }

  # The queue once a promotion is in it: the timer may have promoted the job (it wakes at least
  # every second, on its own thread) just before the call that would have.
  def promoted(klass)
    wait_until(timeout: 5, interval: 0.01, what: "a promoted job enqueued") { queue(klass).any? }
    queue(klass)
  end
end

# limits_concurrency and concurrency_rule under Ferrolock::Testing: each scenario runs against a real
# redis-server (real!) and in memory (fake!) and expects the same jobs run, blocked, discarded and
# promoted, and the same events, on ActiveJob's :test and :inline adapters. Time moves through
# ScenarioClock (a Time.now stub in fake mode, a real wait against Redis).
RSpec.shared_examples "limits_concurrency on a ferrolock backend" do |mode|
  include_context "jobs in a ferrolock testing mode", mode

  let(:clock) { FerrolockTest::ScenarioClock.new(mode, self) }
  let(:events) { [] }

  around do |example|
    subscription = Ferrolock.subscribe(:blocked, :promoted, :released, :discarded, :lock_lost) do |event, payload|
      # Only ActiveJob's concurrency events, and only this file's jobs' losses: what another spec left
      # may be released by the reaper (a holder thread that died) or found lost at any moment.
      next unless %i[limits_concurrency concurrency_rule].include?(payload[:primitive])
      next if event == :lock_lost && !payload[:name].to_s.start_with?("Tjc")

      events << [event, payload[:job_id]]
    end
    example.run
  ensure
    Ferrolock.unsubscribe(subscription)
  end

  it "blocks the jobs past to:, enqueues them FIFO as slots free, one growing fencing token each" do
    klass = recording("TjcFifoJob", to: 2, key: ->(account, _n) { account })
    jobs = Array.new(5) { |n| klass.perform_later("a", n) }
    expect(jobs).to all(be_a(klass)) # a blocked job is stored: not false
    expect(queued(klass)).to eq([["a", 0], ["a", 1]])
    work_off(klass)
    runs = ran
    expect(runs.map { |_, n, _| n }).to eq([0, 1, 2, 3, 4])
    expect(runs.map(&:last)).to all(be_a(Integer))
    expect(runs.map(&:last)).to eq(runs.map(&:last).sort.uniq)
    ids = jobs.map(&:job_id)
    expect(events).to eq(ids[2, 3].map { |id| [:blocked, id] } +
                         [[:promoted, ids[2]], [:released, ids[0]], [:promoted, ids[3]], [:released, ids[1]],
                          [:promoted, ids[4]], [:released, ids[2]], [:released, ids[3]], [:released, ids[4]]])
  end

  it "blocks a job delivered without a slot (an adapter's retry) at perform, and runs it once promoted" do
    klass = recording("TjcRetryJob", to: 1, key: ->(account, _n) { account })
    klass.perform_later("a", 0)
    holder = queue(klass).shift.transform_keys(&:to_s)
    ::ActiveJob::Base.execute(klass.new("a", 1).serialize)
    expect(ran).to be_empty
    expect(log.string).to include("blocked at perform")
    ::ActiveJob::Base.execute(holder)
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([0, 1])
  end

  it "gives back the slot of a promoted job that fails before it performs (its class missing): the next runs" do
    klass = recording("TjcPoisonJob", to: 1, key: ->(account, _n) { account })
    jobs = Array.new(3) { |n| klass.perform_later("a", n) }
    run_queued(klass) # 0 runs; 1 is promoted
    promoted(klass).first["job_class"] = "TjcNoSuchJob" # a worker without the class
    expect { run_queued(klass) }.to raise_error(NameError)
    expect(promoted(klass).map { |job| job["job_id"] }).to eq([jobs[2].job_id])
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([0, 2])
    expect(log.string).to include("TjcNoSuchJob #{jobs[1].job_id} failed before it performed")
  end

  it "discards a job over the limit with on_conflict: :discard (perform_later false, :discarded)" do
    klass = recording("TjcDiscardJob", to: 1, key: ->(account, _n) { account }, on_conflict: :discard)
    first = klass.perform_later("a", 0)
    expect([first, klass.perform_later("a", 1), klass.perform_later("b", 2)]).to match([klass, false, klass])
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([0, 2])
    expect(events.map(&:first)).to eq(%i[discarded released released])
    expect(log.string).to include("on_conflict: :discard")
  end

  it "applies max_blocked: TooManyBlocked, or false with on_max_blocked: :discard" do
    raising = recording("TjcMaxJob", to: 1, key: ->(account, _n) { account }, max_blocked: 1)
    2.times { |n| raising.perform_later("a", n) }
    expect { raising.perform_later("a", 2) }
      .to raise_error(Ferrolock::ActiveJob::Concurrency::TooManyBlocked, /1 jobs blocked already.*max_blocked/)
    dropping = recording("TjcMaxDropJob", to: 1, key: ->(account, _n) { account }, max_blocked: 1,
                                          on_max_blocked: :discard)
    2.times { |n| dropping.perform_later("a", n) }
    expect(dropping.perform_later("a", 2)).to be(false)
    work_off(dropping)
    expect(ran.map { |_, n, _| n }).to eq([0, 1])
  end

  it "frees a dead holder's slot when its lease runs out: the blocked job goes first, a new one waits" do
    klass = recording("TjcLeaseJob", to: 1, key: ->(account, _n) { account }, duration: 0.5)
    klass.perform_later("a", 0)
    blocked = klass.perform_later("a", 1)
    queue(klass).clear # the holder's worker died with it: it never performs nor releases
    clock.advance(0.7)
    later = klass.perform_later("a", 2)
    expect(promoted(klass).map { |job| job["job_id"] }).to eq([blocked.job_id])
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([1, 2])
    expect(events.select { |event, _| event == :promoted }.map(&:last)).to eq([blocked.job_id, later.job_id])
  end

  it "has the timer enqueue the blocked job once a dead holder's lease ran out, with no other call" do
    klass = recording("TjcTimerJob", to: 1, key: ->(account, _n) { account }, duration: 0.5)
    klass.perform_later("a", 0)
    klass.perform_later("a", 1)
    queue(klass).clear
    clock.advance(0.7)
    promoted(klass)
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([1])
  end

  # Three jobs of one key with to: 1; the holder runs, and its release promotes the second job,
  # whose enqueue fails (the queue is down). Returns the jobs.
  def lose_a_promotion(klass)
    failing = stub_const("TjcFailingAdapter", Class.new do
      def enqueue(_job) = raise(IOError, "queue down")
      def enqueue_at(job, _timestamp) = enqueue(job)
    end)
    jobs = Array.new(3) { |n| klass.perform_later("a", n) }
    holder = queue(klass).shift.transform_keys(&:to_s)
    klass.queue_adapter = failing.new
    ::ActiveJob::Base.execute(holder)
    klass.queue_adapter = :test
    expect(queue(klass)).to be_empty
    expect(log.string).to include("could not enqueue promoted job #{jobs[1].job_id}")
    jobs
  end

  it "puts a promoted job whose enqueue failed back at the head of the line when its lease runs out" do
    # The slots key must outlive that lease (while the payload is kept), or the expired slot goes
    # with it and the job is left out of the line.
    klass = recording("TjcLostPromotionJob", to: 1, key: ->(account, _n) { account }, duration: 0.5)
    lose_a_promotion(klass)
    clock.advance(0.7)
    klass.perform_later("a", 3)
    expect(promoted(klass).map { |job| job["arguments"] }).to eq([["a", 1]])
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([0, 1, 2, 3])
  end

  it "has the timer enqueue again a promoted job whose enqueue failed, with no other call" do
    # The key stays in the timer's index while a promoted job has not started.
    klass = recording("TjcLostPromotionTimerJob", to: 1, key: ->(account, _n) { account }, duration: 0.5)
    lose_a_promotion(klass)
    clock.advance(0.7)
    expect(promoted(klass).map { |job| job["arguments"] }).to eq([["a", 1]])
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([0, 1, 2])
  end

  it "runs once a promoted job whose copy outwaited its lease: the copy of its second promotion is skipped" do
    klass = recording("TjcPromotedTwiceJob", to: 1, key: ->(account, _n) { account }, duration: 0.5)
    klass.perform_later("a", 0)
    second = klass.perform_later("a", 1)
    run_queued(klass) # its release promotes the second job, whose copy then waits in the queue
    clock.advance(0.7)
    klass.perform_later("a", 2) # (or the timer) finds that lease ran out and promotes the second job again
    wait_until(timeout: 5, what: "the second job promoted again") { queue(klass).size >= 2 }
    expect(queue(klass).first(2).map { |job| job["job_id"] }).to eq([second.job_id] * 2)
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([0, 1, 2])
    expect(events).to include([:discarded, second.job_id])
  end

  it "runs one of the copies left when the first copy of a job promoted three times fails before it performs" do
    klass = recording("TjcThriceBrokenJob", to: 1, key: ->(account, _n) { account }, duration: 0.5)
    klass.perform_later("a", 0)
    second = klass.perform_later("a", 1)
    run_queued(klass) # its release promotes the second job, whose copies then wait in the queue
    2.times do |n|
      clock.advance(0.7) # the timer finds the lease ran out and promotes the second job again
      wait_until(timeout: 5, what: "the second job promoted #{n + 2} times") { queue(klass).size >= n + 2 }
    end
    expect(queue(klass).map { |job| job["job_id"] }.uniq).to eq([second.job_id])
    queue(klass).first["job_class"] = "TjcNoSuchJob" # its first copy meets a worker without the class
    expect { run_queued(klass) }.to raise_error(NameError)
    work_off(klass) # the first of the other copies runs; the rest are duplicates
    expect(ran.map { |_, n, _| n }).to eq([0, 1])
  end

  it "keeps a performing job's slot past its lease (renewed while it performs)" do
    stub_const("TJC_CLOCK", clock)
    klass = job_class("TjcLongJob", to: 1, key: ->(_num) { "k" }, duration: 0.5) do
      def perform(num)
        TJC_CLOCK.advance(0.8) if num.zero?
        self.class.perform_later(1) if num.zero?
        LC_RAN << [num, ferrolock_slot_lost?, self.class.queue_adapter.enqueued_jobs.size]
      end
    end
    first = klass.perform_later(0)
    work_off(klass)
    expect(ran).to eq([[0, false, 0], [1, false, 0]])
    expect(events.map(&:first)).to eq(%i[blocked promoted released released])
    expect(events[2]).to eq([:released, first.job_id])
  end

  it "lets a job that enqueues itself again while it performs keep its slot" do
    klass = job_class("TjcResumeJob", to: 1, key: ->(account, _n) { account }) do
      def perform(account, num)
        LC_RAN << [account, num, ferrolock_fence]
        retry_job if num.zero? && executions == 1 # a continuation's resumption: same job_id, queued again
      end
    end
    first = klass.perform_later("a", 0)
    run_queued(klass)
    other = klass.perform_later("a", 1) # blocked: the resumption holds the slot
    expect(queue(klass).map { |job| job["job_id"] }).to eq([first.job_id])
    work_off(klass)
    runs = ran
    expect(runs.map { |_, n, _| n }).to eq([0, 0, 1])
    expect(runs.map(&:last)).to eq(runs.map(&:last).sort.uniq)
    expect(events.map(&:first)).to eq(%i[blocked promoted released released])
    expect(events.last.last).to eq(other.job_id)
  end

  it "runs :inline jobs at once while a slot is free, and a blocked one when the slot frees" do
    klass = job_class("TjcInlineJob", adapter: :inline, to: 1, key: ->(_n) { "k" }) do
      def perform(num)
        LC_RAN << num
        self.class.perform_later(num + 10) if num < 2 # enqueued while this job holds the only slot
      end
    end
    klass.perform_later(0)
    klass.perform_later(1)
    expect(ran).to eq([0, 10, 1, 11])
  end

  describe "concurrency_rule" do
    let(:active_job_log) { StringIO.new }

    before { ActiveJob::Base.logger = Logger.new(active_job_log) }

    it "perform_limit: a job over it runs again later, the delay in ActiveJob's own Retrying line" do
      stub_const("LC_NESTED", [])
      klass = job_class("LcRuleLimitJob") do
        concurrency_rule key: ->(account, _num) { account }, perform_limit: 1

        def perform(account, num)
          LC_RAN << [account, num]
          # A second job of the key performs while this one holds the only slot.
          ::ActiveJob::Base.execute(LC_NESTED.pop) if num.zero?
        end
      end
      klass.perform_later("a", 0)
      klass.perform_later("a", 1)
      LC_NESTED << queue(klass).pop.transform_keys(&:to_s)
      run_queued(klass)
      expect(ran).to eq([["a", 0]])
      expect(queue(klass).size).to eq(1)
      retried = queue(klass).first
      expect(retried["arguments"]).to eq(["a", 1])
      expect(retried[:at] || retried["scheduled_at"]).not_to be_nil
      expect(active_job_log.string).to match(/Retrying LcRuleLimitJob.* in 1 seconds, due to a Ferrolock::OverLimit/)
      run_queued(klass) # its time came: the slot is free
      expect(ran).to eq([["a", 1]])
    end

    it "perform_throttle and enqueue_throttle, several rules on one class" do
      klass = job_class("LcRuleThrottleJob") do
        concurrency_rule key: "partner", perform_throttle: [1, 60]
        concurrency_rule key: ->(account, _num) { account }, enqueue_throttle: [2, :hour]

        def perform(account, num) = LC_RAN << [account, num]
      end
      expect([klass.perform_later("a", 0), klass.perform_later("a", 1)]).to all(be_a(klass))
      expect(klass.perform_later("a", 2)).to be(false) # the enqueue_throttle of "a"
      expect(klass.perform_later("b", 3)).to be_a(klass)
      run_queued(klass)
      run_queued(klass) # the perform_throttle's one run a minute is spent
      expect(ran).to eq([["a", 0]])
      expect(active_job_log.string)
        .to match(/Retrying LcRuleThrottleJob.* in (59|60) seconds, due to a Ferrolock::OverLimit/)
      expect(queue(klass).map { |job| job["arguments"] }).to eq([["b", 3], ["a", 1]])
    end

    it "enqueue_limit and total_limit: places taken at enqueue, freed as a job starts (queued) or ends (total)" do
      klass = job_class("TjcRulePlacesJob") do
        concurrency_rule key: "all", enqueue_limit: 1
        concurrency_rule key: "all", total_limit: 2

        def perform(num)
          LC_RAN << num
          LC_RAN << self.class.perform_later(num + 10).class if num.zero? # its queued place is free now
        end
      end
      expect([klass.perform_later(0), klass.perform_later(1)]).to match([klass, false]) # enqueue_limit
      run_queued(klass)
      expect(ran).to eq([0, klass])
      expect(klass.perform_later(2)).to be(false) # 10 queued holds the one queued place
      work_off(klass)
      expect([ran, klass.perform_later(3).class, klass.perform_later(4)]).to eq([[10], klass, false])
      expect(events.map(&:first)).to eq(%i[discarded discarded discarded])
    end
  end
end

RSpec.describe Ferrolock::Testing, "with ActiveJob concurrency limits" do
  context "with real!" do
    it_behaves_like "limits_concurrency on a ferrolock backend", :real
  end

  context "with fake!" do
    it_behaves_like "limits_concurrency on a ferrolock backend", :fake
  end
end

# What only the testing mode has: ActiveSupport's travel, reset! and disable!.
RSpec.describe Ferrolock::Testing, "fake! and disable! with limits_concurrency" do
  include_context "jobs in a ferrolock testing mode", :fake
  include ActiveSupport::Testing::TimeHelpers

  after { travel_back }

  def counting(name, **limits, &body)
    job_class(name, **limits) do
      define_method(:perform) { |num| LC_RAN << [num, ferrolock_fence, ferrolock_slot_lost?] }
      class_eval(&body) if body
    end
  end

  it "frees a slot whose lease (duration:) ran out under travel: the next enqueue promotes the blocked job" do
    klass = counting("TjcTravelJob", to: 1, key: "k", duration: 5.minutes)
    2.times { |n| klass.perform_later(n) }
    queue(klass).clear # the holder never runs
    travel 4.minutes
    klass.perform_later(2)
    expect(queued(klass)).to eq([])
    travel 2.minutes
    klass.perform_later(3)
    expect(promoted(klass).map { |job| job["arguments"] }).to eq([[1]])
    work_off(klass)
    expect(ran.map(&:first)).to eq([1, 2, 3])
  end

  it "forgets every slot and blocked job on reset!; a job whose slot went says so and its release frees nothing" do
    lost = []
    subscription = Ferrolock.subscribe(:lock_lost) do |_, payload|
      lost << payload[:detected] if payload[:name].to_s.start_with?("TjcResetJob/")
    end
    klass = counting("TjcResetJob", to: 1, key: "k") do
      define_method(:perform) do |num|
        Ferrolock::Testing.reset! if num.zero?
        LC_RAN << [num, ferrolock_fence, ferrolock_slot_lost?]
      end
    end
    3.times { |n| klass.perform_later(n) }
    expect(queued(klass)).to eq([[0]])
    work_off(klass)
    expect(ran).to match([[0, Integer, true]])
    expect(lost).to eq([:release])
    klass.perform_later(3) # 1 and 2 were forgotten: the key is free
    work_off(klass)
    expect(ran).to match([[3, Integer, false]])
  ensure
    Ferrolock.unsubscribe(subscription) if subscription
  end

  it "passes every job through under disable! (limits_concurrency and concurrency_rule)" do
    klass = counting("TjcDisabledJob", to: 1, key: "k", on_conflict: :discard) do
      concurrency_rule key: "k", enqueue_limit: 1, perform_limit: 1
    end
    Ferrolock::Testing.disable! do
      expect(Array.new(3) { |n| klass.perform_later(n) }).to all(be_a(klass))
      work_off(klass)
      expect(ran).to eq([[0, nil, false], [1, nil, false], [2, nil, false]])
    end
  end
end
