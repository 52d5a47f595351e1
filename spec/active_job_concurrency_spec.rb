# frozen_string_literal: true

require "logger"
require_relative "support/active_job_jobs"

# limits_concurrency (Ferrolock::ActiveJob::Concurrency) in this process against the test Redis, on
# ActiveJob's :test adapter (its queue is read and run here, as a worker would: ActiveJob::Base.execute
# on the payload) and on :async. The Sidekiq processes' proofs are in
# spec/active_job_concurrency_processes_spec.rb; the scenarios that Ferrolock::Testing.fake! must
# answer alike (max_blocked, the check at perform, resumption, :inline, perform rules ...) run against
# Redis and in memory in spec/testing_active_job_concurrency_spec.rb.
RSpec.describe "ActiveJob limits_concurrency", time_limit: 30 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:log) { StringIO.new }

  # No timer of this process outlives the examples (the suite's Redis goes after them).
  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  around do |example|
    previous = [ActiveJob::Base.logger, Ferrolock.config.logger]
    ActiveJob::Base.logger = Logger.new(nil)
    Ferrolock.config.logger = Logger.new(log)
    LC_RAN.clear
    example.run
  ensure
    ActiveJob::Base.logger, Ferrolock.config.logger = previous
  end

  include FerrolockTest::ActiveJobJobs

  it "parks the jobs over the limit in Redis and enqueues them FIFO as slots free, one fencing token each" do
    events = []
    subscription = Ferrolock.subscribe(:blocked, :promoted, :released) do |event, payload|
      # (A DistMutex another spec left to the reaper may be released meanwhile.)
      events << [event, payload[:job_id]] if payload[:primitive] == :limits_concurrency
    end
    klass = recording("LcFifoJob", to: 1, key: ->(account, _n) { account })
    jobs = Array.new(4) { |n| klass.perform_later("a", n) } << klass.perform_later("b", 9)

    # A blocked job is stored: perform_later returns it (not false), yet the adapter got only the first.
    expect(jobs).to all(be_a(klass))
    expect(queue(klass).map { |job| job["arguments"] }).to eq([["a", 0], ["b", 9]])
    expect(redis.lrange("ferrolock:{concurrency:LcFifoJob/a}:blocked", 0, -1)).to eq(jobs[1, 3].map(&:job_id))

    work_off(klass)
    runs = ran
    expect(runs.map { |account, n, _| [account, n] }).to eq([["a", 0], ["b", 9], ["a", 1], ["a", 2], ["a", 3]])
    blocked = jobs[1, 3].map(&:job_id)
    released, others = events.partition { |event, _| event == :released }
    expect(others).to eq(blocked.map { |id| [:blocked, id] } + blocked.map { |id| [:promoted, id] })
    # Each slot given back as its job ended, in the order they ran.
    expect(released.map(&:last)).to eq(jobs.values_at(0, 4, 1, 2, 3).map(&:job_id))
    fences = runs.select { |account, _, _| account == "a" }.map(&:last)
    expect(fences).to all(be_a(Integer))
    expect(fences).to eq(fences.sort.uniq)
    # Idle: nothing held, blocked or pending; only the fencing counters are left, and they expire
    # (the index of keys with blocked jobs goes at the timer's next visit, within its 1 s wake-up; a
    # loaded machine, as CI's three suites on two cores, delays its thread: ci39 missed 3 s).
    fences_only = %w[a b].map { |account| "ferrolock:{concurrency:LcFifoJob/#{account}}:fence" }
    wait_until(timeout: 15, what: -> { "only the fences left: #{redis.keys("*").sort}" }) do
      redis.keys("*").sort == fences_only
    end
    redis.keys("*").each { |key| expect(redis.pttl(key)).to be_between(1, 1_800_000), key }
  ensure
    Ferrolock.unsubscribe(subscription) if subscription
  end

  it "groups classes under one limit and keys a record by its GlobalID" do
    record = Struct.new(:id) { def to_global_id = "gid://app/Account/#{id}" }
    stub_const("LcAccount", record)
    limits = { to: 1, key: ->(id) { LcAccount.new(id) }, group: "accounts" }
    one = job_class("LcGroupOneJob", **limits) { def perform(_) = nil }
    two = job_class("LcGroupTwoJob", **limits) { def perform(_) = nil }
    one.perform_later(7)
    two.perform_later(7)
    expect(queue(one).size + queue(two).size).to eq(1)
    expect(redis.llen("ferrolock:{concurrency:accounts/gid://app/Account/7}:blocked")).to eq(1)
  end

  it "discards a job over the limit with on_conflict: :discard (perform_later false), storing nothing" do
    klass = recording("LcDiscardJob", to: 1, key: ->(account, _n) { account }, on_conflict: :discard)
    expect(klass.perform_later("a", 0)).to be_a(klass)
    expect(klass.perform_later("a", 1)).to be(false)
    expect(redis.exists?("ferrolock:{concurrency:LcDiscardJob/a}:blocked")).to be(false)
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([0])
    expect(log.string).to include("on_conflict: :discard")
  end

  it "emits :discarded with the reason" do
    events = []
    subscription = Ferrolock.subscribe(:discarded) { |_, payload| events << payload }
    klass = recording("LcDiscardEventJob", to: 1, key: ->(account, _n) { account }, on_conflict: :discard)
    klass.perform_later("a", 0)
    second = klass.perform_later("a", 1) || nil
    expect(second).to be_nil
    expect(events).to contain_exactly(include(primitive: :limits_concurrency, name: "LcDiscardEventJob/a",
                                              job_class: "LcDiscardEventJob", at: :enqueue, reason: :on_conflict))
  ensure
    Ferrolock.unsubscribe(subscription) if subscription
  end

  it "frees a dead holder's slot when its lease runs out and enqueues the next blocked job then" do
    klass = recording("LcDeadHolderJob", to: 1, key: ->(account, _n) { account }, duration: 0.5)
    admitted_at = Ferrolock.monotonic
    klass.perform_later("a", 0)
    klass.perform_later("a", 1)
    queue(klass).clear # the holder's worker died with it: it never performs nor releases
    wait_until(timeout: 5, interval: 0.01, what: "the blocked job promoted") { queue(klass).any? }
    # The lease (0.5 s) plus at most the timer's wake-up (1 s): never a sweep period of its own.
    expect(Ferrolock.monotonic - admitted_at).to be_between(0.45, 2.0)
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([1])
  end

  it "gives the slot back at once when the adapter fails to enqueue the job it was taken for" do
    failing = stub_const("LcFailingAdapter", Class.new do
      def enqueue(_job) = raise(IOError, "queue down")
      def enqueue_at(job, _timestamp) = enqueue(job)
    end)
    klass = recording("LcEnqueueFailsJob", to: 1, key: ->(account, _n) { account })
    klass.queue_adapter = failing.new
    expect { klass.perform_later("a", 0) }.to raise_error(IOError, "queue down")
    expect(redis.zcard("ferrolock:{concurrency:LcEnqueueFailsJob/a}:slots")).to eq(0)
    klass.queue_adapter = :test
    expect(klass.perform_later("a", 1)).to be_a(klass)
    expect(queue(klass).size).to eq(1) # not blocked behind a slot nobody holds
  end

  it "keeps the slot of a Rails 8.1 continuation across its interruption: the resumption never waits behind itself" do
    skip "ActiveJob #{ActiveJob.version} has no continuations (FERROLOCK_RAILS=8.1 runs this)" unless
      defined?(ActiveJob::Continuable)
    stopping = [true]
    klass = continuable("LcContinuableJob", stopping, to: 1, key: ->(_num) { "k" })
    first = klass.perform_later(0)
    ::ActiveJob::Base.execute(queue(klass).shift.transform_keys(&:to_s)) # interrupted after item 0
    other = klass.perform_later(1)
    expect(queue(klass).map { |job| job["job_id"] }).to eq([first.job_id]) # the resumption, holding the slot
    expect(redis.lrange("ferrolock:{concurrency:LcContinuableJob/k}:blocked", 0, -1)).to eq([other.job_id])
    stopping[0] = false
    work_off(klass)
    runs = ran
    expect(runs.map { |num, item, _| [num, item] }).to eq([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]])
    expect(runs.map(&:last).uniq.size).to eq(3) # one fencing token per run: interrupted, resumed, the other
  end

  it "tells a job whose slot was taken from it (ferrolock_slot_lost?, :lock_lost) and its late release frees nothing" do
    events = []
    # Only this job's key: a lock another spec left held may be lost at any moment.
    subscription = Ferrolock.subscribe(:lock_lost) { |_, payload| events << payload if payload[:name] == "LcLostJob/k" }
    klass = job_class("LcLostJob", to: 1, key: ->(_) { "k" }, duration: 0.3) do
      def perform(_)
        redis = FerrolockTest.redis_server.redis
        redis.del("ferrolock:{concurrency:LcLostJob/k}:slots") # the lease ran out and someone took the slot
        redis.zadd("ferrolock:{concurrency:LcLostJob/k}:slots", (Time.now.to_i * 1000) + 60_000, "someone-else")
        deadline = Ferrolock.monotonic + 2
        sleep 0.01 until ferrolock_slot_lost? || Ferrolock.monotonic > deadline
        LC_RAN << ferrolock_slot_lost?
      end
    end
    klass.perform_later(1)
    work_off(klass)
    expect(ran).to eq([true])
    expect(redis.zrange("ferrolock:{concurrency:LcLostJob/k}:slots", 0, -1)).to eq(["someone-else"])
    wait_until(timeout: 2, what: "the :lock_lost events") { events.size >= 2 }
    expect(events.map { |e| e[:detected] }).to include(:renewal, :release)
    expect(events).to all(include(primitive: :limits_concurrency, name: "LcLostJob/k"))
  ensure
    Ferrolock.unsubscribe(subscription) if subscription
  end

  it "holds to: at every instant on the :async adapter, with promoted jobs run by its threads" do
    stub_const("LC_NOW", Concurrent::AtomicFixnum.new(0))
    stub_const("LC_MAX", Concurrent::AtomicFixnum.new(0))
    klass = job_class("LcAsyncJob", adapter: ActiveJob::QueueAdapters::AsyncAdapter.new(min_threads: 6, max_threads: 6),
                                    to: 2, key: ->(_n) { "k" }) do
      def perform(num)
        now = LC_NOW.increment
        LC_MAX.update { |max| [max, now].max }
        sleep 0.02
        LC_NOW.decrement
        LC_RAN << num
      end
    end
    30.times { |n| klass.perform_later(n) }
    wait_until(timeout: 20, interval: 0.02, what: "30 jobs") { LC_RAN.size == 30 }
    expect(LC_MAX.value).to eq(2)
    expect(ran.sort).to eq((0...30).to_a)
  end

  # The index of keys with parked jobs is what finds a key whose holders all died. A timer's visit
  # that found none parked drops the key's entry only while the entry still has the visit's claim:
  # the first job blocked in a line makes the entry due at once, so a drop that comes after leaves
  # it. The visit's last half (forget.lua) is run by hand after such a block, with no timer in this
  # process (the native object, not Slots).
  it "keeps a key in the index when its first job is blocked after a visit found the line empty" do
    client = Ferrolock::Client.new(url: FerrolockTest.redis_server.url, namespace: "lc-index")
    native = Ferrolock::Native::JobConcurrency.new(client.native)
    policy = [1, 5.0, "block", 0]
    expect(native.admit("k", "holder", "{}", true, policy, 0).first).to eq(:held)
    expect(native.admit("k", "first", "{}", false, policy, 0).first).to eq(:blocked)
    due = native.due_key
    expect(redis.zscore(due, "k")).to eq(1.0) # the first blocked job: due at once
    names, = native.due(5.0)
    expect(names).to eq(["k"])
    # The holder ends: "first" is promoted, and starts. Nothing is parked now (what a visit then
    # reads: the entry is made due at once and claimed again); then "second" is blocked, the first
    # of the line again.
    expect(native.give_back("k", "holder", 1, 0)).to eq([true, [["first", "{}", 1]]])
    expect(native.admit("k", "first", "{}", true, policy, 0).first).to eq(:held)
    expect(redis.zscore(due, "k")).to eq(1.0)
    names, claim, = native.due(5.0)
    expect(names).to eq(["k"])
    expect(native.admit("k", "second", "{}", false, policy, 0).first).to eq(:blocked)
    forget = File.read(File.expand_path("../ext/ferrolock-core/lua/job_concurrency/forget.lua", __dir__))
    expect(redis.eval(forget, keys: [due], argv: ["k", claim])).to eq(0)
    expect(redis.zscore(due, "k")).to eq(1.0)
    # The next visit finds "second" waiting and keeps the key, at its holder's lease expiry.
    names, claim, = native.due(5.0)
    expect(names).to eq(["k"])
    expect(native.reap("k", claim)).to eq([])
    expect(redis.zscore(due, "k")).to be > 1.0
  ensure
    redis.del(redis.keys("lc-index:*"))
  end

  it "runs on a Redis Cluster: each key's slots, line and payloads in one hash slot, the index in its own" do
    require_relative "support/redis_cluster"
    cluster = FerrolockTest::RedisCluster.shared
    cluster.flushall
    Ferrolock.configure { |c| c.redis_cluster = cluster.urls }
    klass = recording("LcClusterJob", to: 1, key: ->(account, _n) { account }, duration: 0.5)
    %w[a b c].each { |account| 3.times { |n| klass.perform_later(account, n) } }
    queue(klass).shift # the holder of "a" dies: the timer promotes "a"'s next job when its lease runs out
    wait_until(timeout: 5, interval: 0.02, what: "a's next job promoted") do
      queue(klass).any? { |job| job["arguments"] == ["a", 1] }
    end
    work_off(klass)
    expect(ran.map { |account, n, _| [account, n] }.sort).to eq(%w[a b c].product([0, 1, 2]) - [["a", 0]])
  ensure
    Ferrolock.configure { |c| c.redis_cluster = nil }
  end

  it "shows operators each key's holders and blocked jobs, and force-releases a holder (the next job is enqueued)" do
    klass = recording("LcAdminJob", to: 1, key: ->(account, _n) { account }, duration: 60)
    holder = klass.perform_later("a", 0)
    waiting = Array.new(2) { |n| klass.perform_later("a", n + 1) }
    admin = Ferrolock::Admin.new
    items = admin.concurrency("LcAdminJob/*").items
    expect(items.size).to eq(1)
    info = items.first
    expect(info.to_h).to include(kind: :limits_concurrency, key: "LcAdminJob/a", limit: 1, blocked: 2,
                                 oldest_job_id: waiting.first.job_id, oldest_age: be_between(0, 5))
    expect(info.holders.map { |slot| [slot.token, slot.ttl] }).to match([[holder.job_id, be_within(2).of(60)]])
    expect(admin.limiters("*").items).to be_empty # not a ConcurrentLimiter's
    require "ferrolock/admin/cli"
    out = StringIO.new
    code = Ferrolock::Admin::Cli.new(["concurrency", "--url", FerrolockTest.redis_server.url], out: out,
                                                                                               err: StringIO.new).run
    expect([code, out.string]).to match([0, include("LcAdminJob/a", holder.job_id, "BLOCKED")])
    require_relative "support/sidekiq_web"
    app = FerrolockTest::SidekiqWeb.app # (loads Rack)
    require "rack/mock"
    web = Rack::MockRequest.new(app).get("/locks/concurrency?q=LcAdminJob/*")
    expect([web.status, web.body]).to match([200, include(holder.job_id, waiting.first.job_id)])
    expect(web.body).to match(%r{<code>LcAdminJob(/|&#x2F;)a</code>})
    queue(klass).clear # the holder's process died
    released = []
    subscription = Ferrolock.subscribe(:released) do |_, payload|
      released << payload.values_at(:job_id, :forced) if payload[:primitive] == :limits_concurrency
    end
    expect(admin.force_release_job("LcAdminJob/a", holder.job_id)).to be(true)
    expect(queue(klass).map { |job| job["job_id"] }).to eq([waiting.first.job_id])
    expect(admin.force_release_job("LcAdminJob/a", waiting.last.job_id)).to be(false) # out of the line
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([1])
    expect(released).to eq([[holder.job_id, true], [waiting.last.job_id, true], [waiting.first.job_id, false]])
    expect(admin.concurrency("*").items).to be_empty
  ensure
    Ferrolock.unsubscribe(subscription) if subscription
  end

  describe "concurrency_rule (GoodJob's rules)" do
    let(:active_job_log) { StringIO.new }

    before { ActiveJob::Base.logger = Logger.new(active_job_log) }

    # A rule's refusal puts the job off (a retry later), unlike a continuation: the limits_concurrency
    # slot it took at perform goes to the next blocked job instead of waiting out the retry.
    it "beside limits_concurrency: a job a perform rule puts off gives its slot to the next blocked job" do
      klass = job_class("LcRuleRefusedJob", to: 1, key: ->(_num) { "k" }) do
        concurrency_rule key: "k", perform_throttle: [1, 60]

        def perform(num) = LC_RAN << num
      end
      jobs = Array.new(3) { |num| klass.perform_later(num) }
      slots = "ferrolock:{concurrency:LcRuleRefusedJob/k}:slots"
      run_queued(klass) # 0 runs (the throttle's one run a minute); 1 is promoted
      expect(ran).to eq([0])
      expect(redis.zrange(slots, 0, -1)).to eq([jobs[1].job_id])
      run_queued(klass) # 1 is refused by the throttle and put off for about a minute
      expect(ran).to eq([])
      expect(active_job_log.string).to match(/Retrying LcRuleRefusedJob.* in (59|60) seconds/)
      # Its slot went to 2, queued as 1's perform ended; 1's retry waits without one.
      expect(redis.zrange(slots, 0, -1)).to eq([jobs[2].job_id])
      expect(queue(klass).map { |job| job["arguments"] }).to eq([[1], [2]])
    end

    # Every key left has a TTL within the rule's duration (or the fencing counter's 30 min).
    def expect_keys_expire
      redis.keys("*").each { |key| expect(redis.pttl(key)).to be_between(1, 1_800_000), key }
    end

    it "enqueue_limit: at most n enqueued and not started; past it perform_later is false and the log says why" do
      events = []
      subscription = Ferrolock.subscribe(:discarded) { |_, payload| events << payload }
      klass = job_class("LcRuleEnqueueLimitJob") do
        concurrency_rule key: ->(account, _num) { account }, enqueue_limit: 2

        def perform(account, num)
          LC_RAN << [account, num]
          # Started, it no longer counts: one place is free (a1 holds the other).
          LC_RAN << [self.class.perform_later(account, 10).class, self.class.perform_later(account, 11)] if num.zero?
        end
      end
      expect([klass.perform_later("a", 0), klass.perform_later("a", 1)]).to all(be_a(klass))
      expect(klass.perform_later("a", 2)).to be(false)
      expect(klass.perform_later("b", 3)).to be_a(klass)
      expect(log.string).to include("LcRuleEnqueueLimitJob/a is at its enqueue_limit of 2")
      expect(events).to contain_exactly(include(primitive: :concurrency_rule, at: :enqueue, reason: :enqueue_limit))
      run_queued(klass)
      expect(ran).to eq([["a", 0], [klass, false]])
      work_off(klass)
      expect(ran).to eq([["a", 1], ["b", 3], ["a", 10]])
      expect(redis.exists?("ferrolock:{concurrency:rule:queued:LcRuleEnqueueLimitJob/a}:slots")).to be(false)
      expect_keys_expire
    ensure
      Ferrolock.unsubscribe(subscription) if subscription
    end

    it "total_limit: at most n enqueued or performing; a job delivered without a place waits for one (Retrying)" do
      klass = job_class("LcRuleTotalJob") do
        # Declared first: a later rule's refusal gives its place back.
        concurrency_rule key: "all", enqueue_limit: 10
        concurrency_rule key: ->(account, _num) { account }, total_limit: 2

        def perform(account, num)
          LC_RAN << [account, num]
          # Performing, it still counts: a0 and a1 fill the key.
          LC_RAN << self.class.perform_later(account, 10) if num.zero?
        end
      end
      expect([klass.perform_later("a", 0), klass.perform_later("a", 1)]).to all(be_a(klass))
      expect(klass.perform_later("a", 2)).to be(false)
      expect(klass.perform_later("b", 3)).to be_a(klass)
      expect(log.string).to include("LcRuleTotalJob/a is at its total_limit of 2")
      expect(redis.zcard("ferrolock:{concurrency:rule:queued:LcRuleTotalJob/all}:slots")).to eq(3)
      run_queued(klass)
      expect(ran).to eq([["a", 0], false])
      expect(klass.perform_later("a", 4)).to be_a(klass) # a0 ended: its place is free
      expect(klass.perform_later("a", 5)).to be(false)
      # An adapter's own retry of an earlier job (no enqueue callbacks ran) finds the key full.
      ::ActiveJob::Base.execute(klass.new("a", 6).serialize)
      expect(ran).to be_empty
      expect(active_job_log.string).to match(/Retrying LcRuleTotalJob.* in 1 seconds, due to a Ferrolock::OverLimit/)
      work_off(klass) # a1, b3, a4, then a6: places freed by then
      expect(ran).to eq([["a", 1], ["b", 3], ["a", 4], ["a", 6]])
      expect(redis.exists?("ferrolock:{concurrency:rule:total:LcRuleTotalJob/a}:slots")).to be(false)
      expect_keys_expire
    end

    it "beside limits_concurrency: a refused enqueue is never parked, and a promoted job is never refused" do
      klass = job_class("LcRuleAndLimitJob", to: 1, key: ->(_num) { "k" }) do
        concurrency_rule key: "k", enqueue_limit: 2, duration: 0.5

        def perform(num) = LC_RAN << num
      end
      blocked = "ferrolock:{concurrency:LcRuleAndLimitJob/k}:blocked"
      places = "ferrolock:{concurrency:rule:queued:LcRuleAndLimitJob/k}:slots"
      klass.perform_later(0) # holds the slot
      second = klass.perform_later(1) # blocked by limits_concurrency; the second enqueue place
      expect(klass.perform_later(2)).to be(false) # refused by the rule: not parked, so it never runs
      expect(redis.lrange(blocked, 0, -1)).to eq([second.job_id])
      # The places' lease (0.5 s) runs out, and two later jobs take both: when 0 ends, 1 is promoted
      # and its enqueue must pass (it was enqueued long ago), although the rule's key is full now.
      wait_until(timeout: 3, interval: 0.02, what: "the places' lease run out") { !redis.exists?(places) }
      later = [klass.perform_later(3), klass.perform_later(4)]
      expect(later).to all(be_a(klass))
      expect(redis.zcard(places)).to eq(2)
      work_off(klass)
      expect(ran).to eq([0, 1, 3, 4])
    end

    {
      {} => /concurrency_rule: give perform_limit:, perform_throttle:, enqueue_throttle:, enqueue_limit: or total/,
      { enqueue_limit: 0 } => /concurrency_rule enqueue_limit: .*positive/,
      { total_limit: -1 } => /concurrency_rule total_limit: .*positive/,
      { total_limit: 1.5 } => /concurrency_rule total_limit: .*Integer/,
      { enqueue_limit: 1, duration: "5" } => /concurrency_rule duration: .*number of seconds/,
      { perform_limit: 0 } => /concurrency_rule perform_limit: .*positive/,
      { perform_throttle: 5 } => /concurrency_rule perform_throttle: must be \[count, period\]/,
      { perform_throttle: [0, 60] } => /concurrency_rule perform_throttle: .*positive/,
      { enqueue_throttle: [1, :week] } => /concurrency_rule enqueue_throttle: interval must be/,
      { key: 42, perform_limit: 1 } => /limits_concurrency key: must be a String/
    }.each do |options, message|
      it "raises ArgumentError naming the option at class load for #{options}" do
        expect do
          Class.new(ActiveJob::Base) do
            include Ferrolock::ActiveJob::Concurrency
            concurrency_rule(key: "k", **options)
          end
        end.to raise_error(ArgumentError, message)
      end
    end
  end

  describe "bad options" do
    {
      { to: 0 } => /limits_concurrency to: .*positive/,
      { to: -1 } => /limits_concurrency to: .*positive/,
      { to: 1.5 } => /limits_concurrency to: .*Integer/,
      { key: 42 } => /limits_concurrency key: must be a String, Symbol or a Proc/,
      { duration: "5" } => /limits_concurrency duration: .*number of seconds/,
      { duration: 0 } => /limits_concurrency duration: .*positive/,
      { on_conflict: :wait } => /limits_concurrency on_conflict: must be :block or :discard/,
      { max_blocked: 0 } => /limits_concurrency max_blocked: .*positive/,
      { on_max_blocked: :drop } => /limits_concurrency on_max_blocked: must be :raise or :discard/
    }.each do |options, message|
      it "raises ArgumentError naming the option at class load for #{options}" do
        expect do
          Class.new(ActiveJob::Base) do
            include Ferrolock::ActiveJob::Concurrency
            limits_concurrency(key: "k", **options)
          end
        end.to raise_error(ArgumentError, message)
      end
    end

    it "names key: when the key proc gives something that is no key (a BasicObject too)" do
      klass = job_class("LcBadKeyJob", key: ->(num) { num == 1 ? BasicObject.new : [num] }) { def perform(_) = nil }
      expect { klass.perform_later(1) }.to raise_error(ArgumentError, /limits_concurrency key gave #<BasicObject/)
      expect { klass.perform_later(2) }.to raise_error(ArgumentError, /limits_concurrency key gave \[2\]/)
    end

    it "names to: when a dynamic limit gives no positive Integer" do
      klass = job_class("LcDynamicJob", to: ->(n) { n }, key: "k") { def perform(_) = nil }
      expect { klass.perform_later(0) }.to raise_error(ArgumentError, /limits_concurrency to: .*positive/)
      expect(klass.perform_later(2)).to be_a(klass)
    end
  end

  it "raises Ferrolock::ConnectionError when Redis is down, at enqueue" do
    klass = recording("LcDownJob", to: 1, key: ->(account, _n) { account })
    Ferrolock.configure do |c|
      c.redis_url = "redis://127.0.0.1:1/0"
      c.connect_timeout = 0.2
    end
    expect { klass.perform_later("a", 0) }.to raise_error(Ferrolock::ConnectionError)
  end
end
