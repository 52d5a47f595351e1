# frozen_string_literal: true

require "logger"
require_relative "support/active_job_jobs"

# An operator's live limit on an ActiveJob limits_concurrency key (Admin#set_limit, #pause, #resume,
# #clear_override with kind: :limits_concurrency), against the test Redis, on ActiveJob's :test adapter
# run in this process. The key's own scripts read the override (ext/ferrolock-core/lua/job_concurrency/);
# a resume or a raised limit makes the key due in the timers' index, and this process's ExpiryTimer
# promotes the blocked jobs. The same with two Sidekiq processes: spec/active_job_live_limit_processes_spec.rb.
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
end
