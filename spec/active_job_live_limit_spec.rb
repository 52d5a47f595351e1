# frozen_string_literal: true

require "logger"
require_relative "support/active_job_jobs"
require_relative "support/most_at_once"

# An operator's live limit on an ActiveJob limits_concurrency key (Admin#set_limit, #pause, #resume,
# #clear_override with kind: :limits_concurrency), against the test Redis, on ActiveJob's :test adapter
# run in this process. The key's own scripts read the override (ext/ferrolock-core/lua/job_concurrency/);
# a resume or a raised limit makes the key due in the timers' index, and this process's ExpiryTimer
# promotes the blocked jobs. Then on the :async adapter (this process's threads run the jobs), an enqueue
# refused under a lowered limit, and Rails 8.1 continuations (FERROLOCK_RAILS=8.1). The same with two Sidekiq
# processes: spec/active_job_live_limit_processes_spec.rb; Solid Queue's: spec/solid_queue_live_limit_spec.rb;
# Shoryuken's: spec/shoryuken_sqs_pause_spec.rb.
RSpec.describe "ActiveJob limits_concurrency changed live", time_limit: 30 do
  include FerrolockTest::ActiveJobJobs

  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }
  let(:events) { [] }
  let!(:subscription) { Ferrolock.subscribe(:limit_changed) { |_, payload| events << payload } }

  after { Ferrolock.unsubscribe(subscription) }
  # No timer of this process outlives the examples (the suite's Redis goes after them).
  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  around { |example| with_loggers { example.run } }

  def blocked(key) = redis.llen("ferrolock:{concurrency:#{key}}:blocked")

  it "pauses a key: its jobs are blocked (on_conflict: :discard too), none dropped; resume enqueues them" do
    klass = recording("LlPauseJob", to: 2, key: ->(account, _n) { account }, on_conflict: :discard)
    expect(admin.pause("LlPauseJob/a", kind: :limits_concurrency).to_h).to eq(limit: nil, paused: true)
    jobs = Array.new(5) { |n| klass.perform_later("a", n) }
    expect(jobs).to all(be_a(klass)) # blocked, not discarded (perform_later says false for a discarded job)
    expect(queue(klass)).to be_empty
    expect(blocked("LlPauseJob/a")).to eq(5)
    expect(klass.perform_later("b", 0)).to be_a(klass) # another key: not paused
    work_off(klass)
    expect(ran.map { |account, n, _| [account, n] }).to eq([["b", 0]])

    expect(admin.limit_override("LlPauseJob/a", kind: :limits_concurrency).to_h).to eq(limit: nil, paused: true)
    expect(admin.resume("LlPauseJob/a", kind: :limits_concurrency).to_h).to eq(limit: nil, paused: false)
    # The timer's next visit (at most its 1 s wake-up) promotes 2 (the code's limit) ...
    wait_until(timeout: 5, what: "2 promoted") { queue(klass).size == 2 }
    work_off(klass) # ... and each release the next one
    expect(ran.map { |account, n, _| [account, n] }).to eq((0...5).map { |n| ["a", n] })
    expect(blocked("LlPauseJob/a")).to eq(0)
    expect(redis.exists("ferrolock:{concurrency:LlPauseJob/a}:override")).to eq(0) # resumed, no limit: gone
    expect(events.map { |e| e.values_at(:primitive, :name, :action, :paused) })
      .to eq([[:limits_concurrency, "LlPauseJob/a", :pause, true],
              [:limits_concurrency, "LlPauseJob/a", :resume, false]])
  end

  it "lowers and raises a key's limit without evicting holders; a raise promotes the blocked jobs" do
    klass = recording("LlLimitJob", to: 1, key: ->(account, _n) { account })
    admin.set_limit("LlLimitJob/a", 3, kind: :limits_concurrency)
    Array.new(5) { |n| klass.perform_later("a", n) }
    expect(queue(klass).size).to eq(3) # 3 slots, not the code's 1
    expect(blocked("LlLimitJob/a")).to eq(2)

    admin.set_limit("LlLimitJob/a", 1, kind: :limits_concurrency)
    expect(queue(klass).size).to eq(3) # holders are never evicted
    run_queued(klass)
    run_queued(klass)
    expect(queue(klass).size).to eq(1) # 3, 2, then 1 held: the releases promoted nobody
    run_queued(klass)
    expect(queue(klass).size).to eq(1) # below the limit of 1: the next one

    admin.set_limit("LlLimitJob/a", 5, kind: :limits_concurrency)
    # (The one queued holds its slot; the raise lets the last one in at the timer's next visit.)
    wait_until(timeout: 5, what: "the last one promoted by the raise") { queue(klass).size == 2 }
    work_off(klass)
    expect(ran.map { |_, n, _| n }.sort).to eq((0...5).to_a)
    expect(admin.clear_override("LlLimitJob/a", kind: :limits_concurrency).to_h).to eq(limit: nil, paused: false)
    expect(redis.exists("ferrolock:{concurrency:LlLimitJob/a}:override")).to eq(0)
  end

  it "keeps the override until cleared, with a TTL refreshed by each admission" do
    klass = recording("LlTtlJob", to: 1, key: ->(account, _n) { account })
    key = "ferrolock:{concurrency:LlTtlJob/a}:override"
    admin.set_limit("LlTtlJob/a", 2, kind: :limits_concurrency)
    ttl = Ferrolock::Admin::LimitOverride::TTL * 1000
    expect(redis.pttl(key)).to be_between(ttl - 5000, ttl)
    redis.pexpire(key, 60_000)
    klass.perform_later("a", 0)
    expect(redis.pttl(key)).to be > ttl - 5000 # refreshed by use
    work_off(klass)
    admin.clear_override("LlTtlJob/a", kind: :limits_concurrency)
    expect(redis.exists(key)).to eq(0)
  end

  it "refuses bad input naming the argument" do
    expect { admin.set_limit("LlBad/a", 0, kind: :limits_concurrency) }.to raise_error(ArgumentError, /limit/)
    expect { admin.pause("LlBad/{a}", kind: :limits_concurrency) }.to raise_error(ArgumentError, /name/)
    expect { admin.pause("LlBad/a", kind: :concurrency) }.to raise_error(ArgumentError, /kind/)
  end

  describe "on the :async adapter" do
    # Each run counted in Redis: the most of its key at once ("ll:max:<key>") and its number as it starts
    # ("ll:started:<key>") and ends ("ll:done:<key>").
    let(:klass) do
      job_class("LlAsyncJob", adapter: ActiveJob::QueueAdapters::AsyncAdapter.new(min_threads: 6, max_threads: 6),
                              to: 2, key: ->(key, _num) { key }) do
        def perform(key, num)
          redis = Ferrolock.client
          FerrolockTest::MostAtOnce.counted(redis, "ll:now:#{key}", "ll:max:#{key}") do
            redis.call("RPUSH", "ll:started:#{key}", num)
            sleep 0.1
          end
          redis.call("RPUSH", "ll:done:#{key}", num)
        end
      end
    end

    def nums(list, key) = redis.lrange("#{list}:#{key}", 0, -1).map { |num| Integer(num) }

    def most(key) = Integer(redis.get("ll:max:#{key}") || 0)

    after { %w[mid held].each { |key| admin.clear_override("LlAsyncJob/#{key}", kind: :limits_concurrency) } }

    it "moves the most at once from the code's 2 to 4 when the limit is raised mid-run" do
      24.times { |num| klass.perform_later("mid", num) }
      wait_until(timeout: 10, interval: 0.01, what: "6 jobs done") { nums("ll:done", "mid").size >= 6 }
      before_raise = most("mid")
      admin.set_limit("LlAsyncJob/mid", 4, kind: :limits_concurrency)
      redis.set("ll:max:mid", 0) # from now on
      wait_until(timeout: 10, interval: 0.01, what: "24 jobs done") { nums("ll:done", "mid").size >= 24 }
      expect(before_raise).to eq(2)
      expect(most("mid")).to eq(4) # the releases promote up to the live limit (6 threads: not a lack of them)
      expect(nums("ll:started", "mid")).to match_array(0...24) # each once
    end

    it "starts no job of a paused key; resumed, this process's timer promotes them and each runs once" do
      admin.pause("LlAsyncJob/held", kind: :limits_concurrency)
      8.times { |num| klass.perform_later("held", num) }
      expect(blocked("LlAsyncJob/held")).to eq(8)
      sleep 1.2 # the timer visits the key meanwhile (its 1 s wake-up): paused, it promotes nobody
      expect(nums("ll:started", "held")).to eq([])
      admin.resume("LlAsyncJob/held", kind: :limits_concurrency)
      wait_until(timeout: 10, interval: 0.01, what: "8 jobs done") { nums("ll:done", "held").size >= 8 }
      expect(nums("ll:started", "held")).to match_array(0...8) # each once, none dropped
      expect(most("held")).to eq(2) # resumed: the code's limit
      expect(blocked("LlAsyncJob/held")).to eq(0)
    end
  end

  # A limit lowered below the jobs holding slots evicts none of them and admits no new job until they are
  # fewer than it: with on_conflict: :discard, each enqueue meanwhile is ActiveJob's aborted enqueue.
  it "refuses enqueues (on_conflict: :discard) under a limit lowered below the holders until they fall under it" do
    klass = recording("LlRefuseJob", to: 3, key: ->(account, _n) { account }, on_conflict: :discard)
    expect(Array.new(3) { |n| klass.perform_later("a", n) }).to all(be_a(klass))
    admin.set_limit("LlRefuseJob/a", 1, kind: :limits_concurrency)
    refused = klass.new("a", 10)
    expect(refused.enqueue).to be(false)
    expect(refused.successfully_enqueued?).to be(false) if refused.respond_to?(:successfully_enqueued?)
    if ActiveJob.respond_to?(:perform_all_later)
      bulk = [klass.new("a", 11), klass.new("a", 12)]
      ActiveJob.perform_all_later(bulk)
      expect(bulk.map(&:successfully_enqueued?)).to eq([false, false])
    end
    run_queued(klass) # 2 hold slots
    expect(klass.perform_later("a", 13)).to be(false)
    run_queued(klass) # 1: at the limit
    expect(klass.perform_later("a", 14)).to be(false)
    run_queued(klass) # none
    expect(klass.perform_later("a", 15)).to be_a(klass)
    expect(klass.perform_later("a", 16)).to be(false)
    admin.set_limit("LlRefuseJob/a", 2, kind: :limits_concurrency)
    expect(klass.perform_later("a", 17)).to be_a(klass)
    work_off(klass)
    expect(ran.map { |_, n, _| n }).to eq([0, 1, 2, 15, 17])
  ensure
    admin.clear_override("LlRefuseJob/a", kind: :limits_concurrency)
  end

  describe "Rails 8.1 continuations" do
    before do
      skip "ActiveJob #{ActiveJob.version} has no continuations (FERROLOCK_RAILS=8.1 runs them)" unless
        defined?(ActiveJob::Continuable)
    end

    let(:stopping) { [true] }

    def items(runs) = runs.map { |num, item, _| [num, item] }

    # A continuation's resumption is the same job going on (README): it keeps its slot through a pause, as
    # any holder does, and is never dropped; the new jobs wait until the resume.
    it "keeps a paused key's interrupted continuation going on its slot, blocks the new jobs, drops none" do
      klass = continuable("LlContinuableJob", stopping, to: 1, key: ->(_num) { "k" })
      first = klass.perform_later(0)
      admin.pause("LlContinuableJob/k", kind: :limits_concurrency)
      run_queued(klass) # item 0, then interrupted: it enqueues itself again, holding its slot though paused
      expect(queue(klass).map { |job| job["job_id"] }).to eq([first.job_id])
      other = klass.perform_later(1)
      expect(redis.lrange("ferrolock:{concurrency:LlContinuableJob/k}:blocked", 0, -1)).to eq([other.job_id])
      stopping[0] = false
      work_off(klass) # the resumption; its release promotes nobody while paused
      expect(items(ran)).to eq([[0, 0], [0, 1], [0, 2]])
      expect(blocked("LlContinuableJob/k")).to eq(1)
      admin.resume("LlContinuableJob/k", kind: :limits_concurrency)
      wait_until(timeout: 5, what: "the blocked job promoted by the timer") { queue(klass).size == 1 }
      work_off(klass)
      expect(items(ran)).to eq([[1, 0], [1, 1], [1, 2]])
    ensure
      admin.clear_override("LlContinuableJob/k", kind: :limits_concurrency)
    end

    it "keeps two interrupted continuations' slots under a limit lowered to 1; a new job waits until both ended" do
      klass = continuable("LlLoweredContinuableJob", stopping, to: 2, key: ->(_num) { "k" })
      2.times { |num| klass.perform_later(num) }
      2.times { run_queued(klass) } # each interrupted after item 0, its resumption holding its slot
      admin.set_limit("LlLoweredContinuableJob/k", 1, kind: :limits_concurrency)
      klass.perform_later(2)
      expect(blocked("LlLoweredContinuableJob/k")).to eq(1)
      stopping[0] = false
      run_queued(klass) # 0's resumption ends: 1 holds, the limit is 1, nobody is promoted
      expect(queue(klass).size).to eq(1)
      expect(blocked("LlLoweredContinuableJob/k")).to eq(1)
      run_queued(klass) # 1's: none holds, 2 is promoted by that release
      expect(blocked("LlLoweredContinuableJob/k")).to eq(0)
      work_off(klass)
      expect(items(ran)).to eq([[0, 0], [1, 0], [0, 1], [0, 2], [1, 1], [1, 2], [2, 0], [2, 1], [2, 2]])
    ensure
      admin.clear_override("LlLoweredContinuableJob/k", kind: :limits_concurrency)
    end
  end
end
