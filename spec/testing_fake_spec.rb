# frozen_string_literal: true

require "timeout"
require_relative "support/testing_scenarios"

# Ferrolock::Testing.fake! holds state in process memory: every scenario here runs twice, against
# a real redis-server (real!) and in memory (fake!), and expects the same observable results.
# Time moves through ScenarioClock: a Time.now stub in fake mode, a real wait against Redis.
RSpec.shared_examples "a ferrolock backend" do |mode|
  around { |example| FerrolockTest::TestingModes.around(example, mode) }

  let(:clock) { FerrolockTest::ScenarioClock.new(mode, self) }

  # In fake mode ferrolock's Redis is a closed port: a call reaching it would fail the example.
  before do
    dead = "redis://127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0"
    Ferrolock.configure { |c| c.redis_url = dead } if mode == :fake
  end

  # Runs the block on another thread holding what it took until the returned Queue gets a value.
  def hold_in_thread(&take)
    held = Queue.new
    release = Queue.new
    thread = Thread.new do
      take.call(lambda do
        held << true
        release.pop
      end)
    end
    held.pop
    [release, thread]
  end

  describe Ferrolock::DistMutex do
    it "excludes other threads, releases on unlock and raises TimeoutError after timeout" do
      mutex = Ferrolock::DistMutex.new("report")
      release, thread = hold_in_thread { |wait| mutex.synchronize { wait.call } }
      other = Ferrolock::DistMutex.new("report")
      busy = [mutex.locked?, other.try_lock]
      waited = elapsed { expect { other.lock(timeout: 0.3) }.to raise_error(Ferrolock::TimeoutError, /not acquired/) }
      release << true
      thread.join
      expect(busy).to eq([true, false])
      expect(waited).to be_between(0.25, 2)
      expect([mutex.locked?, other.try_lock, other.locked?]).to eq([false, true, true])
      other.unlock
    end

    it "keeps many threads' sections apart" do
      inside = 0
      most = 0
      count = 0
      threads = Array.new(6) do
        Thread.new do
          mutex = Ferrolock::DistMutex.new("counter")
          30.times do
            mutex.synchronize(timeout: 30) do
              most = [most, inside += 1].max
              Thread.pass
              count += 1
              inside -= 1
            end
          end
        end
      end
      threads.each(&:join)
      expect([count, most]).to eq([180, 1])
    end

    it "wakes a waiter as soon as the holder unlocks" do
      mutex = Ferrolock::DistMutex.new("handoff")
      release, thread = hold_in_thread { |wait| mutex.synchronize { wait.call } }
      waiter = Thread.new { elapsed { Ferrolock::DistMutex.new("handoff").synchronize(timeout: 5) { :ran } } }
      sleep 0.2
      release << true
      thread.join
      expect(waiter.value).to be_between(0.15, 1.5)
    end

    it "hands out a fencing token that grows with every acquisition" do
      mutex = Ferrolock::DistMutex.new("fenced")
      tokens = Array.new(3) { mutex.synchronize { mutex.fencing_token } }
      expect(tokens).to eq(tokens.sort.uniq)
      expect(mutex.fencing_token).to be_nil
    end

    it "hands out no fencing token with fencing: false" do
      mutex = Ferrolock::DistMutex.new("unfenced", fencing: false)
      expect(mutex.synchronize { [mutex.owned?, mutex.fencing_token] }).to eq([true, nil])
    end

    it "frees an expiry-only lock expire seconds after it was taken, not at unlock" do
      mutex = Ferrolock::DistMutex.new("spacer", expire: 0.6, auto_release: false)
      mutex.synchronize { :work }
      after_unlock = mutex.locked?
      clock.advance(0.8)
      expect([after_unlock, mutex.locked?, mutex.try_lock]).to eq([true, false, true])
      mutex.unlock # (it frees nothing: the hold's own record goes)
    end

    it "keeps a held lock past its lease (renewed while held)" do
      mutex = Ferrolock::DistMutex.new("renewed", expire: 0.6)
      held = mutex.synchronize do
        clock.advance(0.9)
        Ferrolock::DistMutex.new("renewed").try_lock
      end
      expect([held, mutex.locked?]).to eq([false, false])
    end

    it "gives up a wait that Timeout interrupts, holding nothing" do
      mutex = Ferrolock::DistMutex.new("interrupted")
      release, thread = hold_in_thread { |wait| mutex.synchronize { wait.call } }
      other = Ferrolock::DistMutex.new("interrupted")
      expect { Timeout.timeout(0.2) { other.lock } }.to raise_error(Timeout::Error)
      owned = other.owned?
      release << true
      thread.join
      expect([owned, other.try_lock]).to eq([false, true])
      other.unlock
    end
  end

  describe Ferrolock::ConcurrentLimiter do
    it "lets `count` blocks in, raises OverLimit for the next after wait_timeout, reports status" do
      limiter = Ferrolock::ConcurrentLimiter.new("erp", 2, wait_timeout: 0.3)
      holders = Array.new(2) { hold_in_thread { |wait| limiter.within_limit { wait.call } } }
      status = limiter.status
      waited = elapsed { expect { limiter.within_limit { :never } }.to raise_error(Ferrolock::OverLimit) }
      holders.each do |release, thread|
        release << true
        thread.join
      end
      expect(status).to eq(limit: 2, in_use: 2, waiting: 0)
      expect(waited).to be_between(0.25, 2)
      expect([limiter.within_limit { :ran }, limiter.status]).to eq([:ran, { limit: 2, in_use: 0, waiting: 0 }])
    end

    it "never lets more than count blocks run at once across many threads" do
      limiter = Ferrolock::ConcurrentLimiter.new("crowd", 3, wait_timeout: 30)
      inside = 0
      most = 0
      guard = Mutex.new
      threads = Array.new(8) do
        Thread.new do
          10.times do
            limiter.within_limit do
              guard.synchronize { most = [most, inside += 1].max }
              sleep 0.005
              guard.synchronize { inside -= 1 }
            end
          end
        end
      end
      threads.each(&:join)
      expect([most, limiter.status]).to eq([3, { limit: 3, in_use: 0, waiting: 0 }])
    end

    it "gives a waiter the slot freed meanwhile and counts it as waiting until then" do
      limiter = Ferrolock::ConcurrentLimiter.new("erp-wait", 1, wait_timeout: 5)
      release, thread = hold_in_thread { |wait| limiter.within_limit { wait.call } }
      waiter = Thread.new { limiter.within_limit { :ran } }
      wait_until { limiter.status[:waiting] == 1 }
      release << true
      thread.join
      expect([waiter.value, limiter.status]).to eq([:ran, { limit: 1, in_use: 0, waiting: 0 }])
    end

    it "shows the limit stored by another limiter of the name in status" do
      mine = Ferrolock::ConcurrentLimiter.new("shared", 2)
      theirs = Ferrolock::ConcurrentLimiter.new("shared", 3)
      release, thread = hold_in_thread { |wait| theirs.within_limit { wait.call } }
      status = mine.status
      release << true
      thread.join
      expect(status).to eq(limit: 2, in_use: 1, waiting: 0, stored_limit: 3)
    end

    it "answers OverLimit at once with wait_timeout 0" do
      limiter = Ferrolock::ConcurrentLimiter.new("erp-now", 1)
      release, thread = hold_in_thread { |wait| limiter.within_limit { wait.call } }
      refuse = -> { limiter.within_limit(wait_timeout: 0) { :never } }
      waited, late = elapsed_and_lateness { expect(&refuse).to raise_error(Ferrolock::OverLimit) }
      release << true
      thread.join
      expect(waited).to be < late_bound(0.2, late)
    end
  end

  describe Ferrolock::DualLock do
    it "runs one duplicate, queues one, skips the next, and runs the queued one after" do
      lock = Ferrolock::DualLock.new("sync:42", max_wait: 5)
      order = Queue.new
      release, first = hold_in_thread { |wait| lock.run { (order << :first) && wait.call } }
      second = Thread.new { lock.run { order << :second } }
      wait_until { lock.waiting? }
      third = lock.run { order << :third }
      state = [lock.executing?, lock.waiting?]
      release << true
      [first, second].each(&:join)
      expect([third, state, second.value]).to eq([false, [true, true], true])
      expect(Array.new(order.size) { order.pop }).to eq(%i[first second])
      expect([lock.executing?, lock.waiting?]).to eq([false, false])
    end

    it "raises TimeoutError after wait_timeout and gives up its place" do
      lock = Ferrolock::DualLock.new("sync:slow", wait_timeout: 0.3)
      release, thread = hold_in_thread { |wait| lock.run { wait.call } }
      waited = elapsed { expect { lock.run { :never } }.to raise_error(Ferrolock::TimeoutError, /wait_timeout/) }
      state = [lock.executing?, lock.waiting?]
      release << true
      thread.join
      expect([waited.between?(0.25, 2), state]).to eq([true, [true, false]])
    end
  end

  describe Ferrolock::RateLimiter do
    it "bucket: a burst of count, then OverLimit with retry_after, then refilled with time" do
      limiter = Ferrolock::RateLimiter.bucket("partner", 4, 1, wait_timeout: 0)
      ran = Array.new(4) { limiter.within_limit { :ok } }
      refused = begin
        limiter.within_limit { :never }
      rescue Ferrolock::OverLimit => e
        e
      end
      clock.advance(0.6)
      expect(ran).to eq([:ok] * 4)
      expect(refused.retry_after).to be_between(0.05, 0.25)
      expect([limiter.within_limit { :again }, limiter.status[:remaining]]).to eq([:again, 1])
    end

    it "window: count calls per window, then OverLimit until the next window" do
      limiter = Ferrolock::RateLimiter.window("hourly", 2, :hour, wait_timeout: 0)
      ran = Array.new(2) { limiter.within_limit { :ok } }
      refused = begin
        limiter.within_limit { :never }
      rescue Ferrolock::OverLimit => e
        e
      end
      expect([ran, limiter.status[:remaining]]).to eq([%i[ok ok], 0])
      expect(refused.retry_after).to be_between(0, 3600)
      expect(limiter.status[:reset_in]).to be_within(0.5).of(refused.retry_after)
    end

    it "leaky: a second call waits for its slot within wait_timeout" do
      limiter = Ferrolock::RateLimiter.leaky("paced", 4, 1, wait_timeout: 2)
      limiter.within_limit { :first }
      waited = elapsed { limiter.within_limit { :second } }
      expect(waited).to be_between(0.15, 1)
    end

    it "sliding window: count calls in any interval" do
      limiter = Ferrolock::RateLimiter.window("log", 2, 0.5, sliding: true, wait_timeout: 0)
      2.times { limiter.within_limit { :ok } }
      expect { limiter.within_limit { :never } }.to raise_error(Ferrolock::OverLimit)
      clock.advance(0.6)
      expect(limiter.within_limit { :again }).to eq(:again)
    end

    it "points: a call spends its cost" do
      limiter = Ferrolock::RateLimiter.points("budget", 10, 60, wait_timeout: 0)
      limiter.within_limit(7) { :big }
      expect { limiter.within_limit(4) { :never } }.to raise_error(Ferrolock::OverLimit)
      expect([limiter.within_limit(3) { :fits }, limiter.status[:remaining]]).to eq([:fits, 0])
    end
  end

  describe Ferrolock::FairTenant do
    rules = [{ queue: "busy", threshold: 2, per: 10 }, { queue: "slow", threshold: 3, per: 0.5 }]

    def route(rules, tenant, jid, mode, record: true)
      Ferrolock::FairTenant.queue_for(rules, job_class: "ReportJob", tenant: tenant, jid: jid, queue: "default",
                                             mode: mode, record: record)
    end

    %i[exact bounded].each do |storage|
      it "#{storage}: reroutes a greedy tenant to the last rule it breaks, and back as windows pass" do
        queues = Array.new(5) { |i| route(rules, "acme", "jid-#{i}", storage) }
        other = route(rules, "other", "jid-x", storage)
        clock.advance(1.2)
        later = route(rules, "acme", "jid-late", storage)
        expect([queues, other, later]).to eq([%w[default default busy slow slow], "default", "busy"])
      end
    end

    it "exact: counts a jid pushed again once" do
      queues = Array.new(4) { route(rules, "acme", "same-jid", :exact) }
      expect(queues).to eq(%w[default] * 4)
    end

    it "reroutes in the client middleware, which records the origin" do
      middleware = Ferrolock::FairTenant::ClientMiddleware.new
      queues = Array.new(3) do |i|
        job = { "class" => "TestingModeTenantJob", "jid" => "j#{i}", "args" => [], "queue" => "default",
                "fair_tenant" => "acme" }
        middleware.call(TestingModeTenantJob, job, "default", nil) { job }
        [job["queue"], job["fair_tenant_origin"]]
      end
      expect(queues).to eq([["default", nil], ["default", nil], %w[slow default]])
    end
  end

  describe Ferrolock::Sidekiq::Unique::ClientMiddleware do
    it "skips a duplicate push while the first holds the digest, and lets it through once released" do
      middleware = described_class.new
      job = ->(jid) { { "class" => "TestingModeUniqueJob", "jid" => jid, "args" => [7], "queue" => "default" } }
      push = ->(jid) { middleware.call(TestingModeUniqueJob, job.call(jid), "default") { :pushed } }
      pushes = [push.call("a" * 24), push.call("b" * 24)]
      settings = Ferrolock::Sidekiq::Unique::Settings.for(TestingModeUniqueJob, job.call("a" * 24))
      lock = Ferrolock::Sidekiq::Unique::Lock.new(Ferrolock::Sidekiq::Unique::Digest.for(settings, job.call("a" * 24)))
      holder = lock.holder
      lock.release("a" * 24)
      expect([pushes, holder, push.call("c" * 24)]).to eq([[:pushed, nil], "a" * 24, :pushed])
    end
  end

  describe Ferrolock::Sidekiq::Unique::ServerMiddleware do
    it "until_executed: keeps duplicates out until the job ran, then lets the next push in" do
      client = Ferrolock::Sidekiq::Unique::ClientMiddleware.new
      job = ->(jid) { { "class" => "TestingModeUniqueJob", "jid" => jid, "args" => [8], "queue" => "default" } }
      push = ->(jid) { client.call(TestingModeUniqueJob, job.call(jid), "default") { :pushed } }
      first = push.call("a" * 24)
      during = nil
      ran = described_class.new.call(TestingModeUniqueJob.new, job.call("a" * 24), "default") do
        during = push.call("b" * 24)
        :ran
      end
      expect([first, during, ran, push.call("c" * 24)]).to eq([:pushed, nil, :ran, :pushed])
    end
  end

  describe Ferrolock::Sidekiq::Unique::Lock do
    it "holds a jid until its ttl passes" do
      lock = described_class.new("digest-ttl")
      taken = [lock.take("one", 0.6), lock.take("two", 0.6)]
      clock.advance(0.8)
      expect([taken, lock.take("two", 5), lock.holder]).to eq([[nil, "one"], nil, "two"])
      expect([lock.release("one"), lock.hand_over("two", "three", 5), lock.holder]).to eq([false, true, "three"])
    end
  end

  describe Ferrolock::Sidekiq::DualLock::Middleware do
    it "skips a third duplicate job while one runs and one waits" do
      middleware = described_class.new
      job = ->(jid) { { "class" => "TestingModeDualJob", "jid" => jid, "args" => [1], "queue" => "default" } }
      runs = Queue.new
      call = lambda do |jid, &work|
        middleware.call(TestingModeDualJob.new, job.call(jid), "default") { (runs << jid) && work&.call }
      end
      release, first = hold_in_thread { |wait| call.call("first", &wait) }
      second = Thread.new { call.call("second") }
      key = Ferrolock::Sidekiq::DualLock::Settings.for(TestingModeDualJob).key_for([1])
      wait_until { Ferrolock::DualLock.new(key).waiting? }
      call.call("third")
      release << true
      [first, second].each(&:join)
      expect(Array.new(runs.size) { runs.pop }).to eq(%w[first second])
    end
  end

  describe Ferrolock::Shoryuken::MessageLock do
    it "runs a message once, skips copies in progress or processed, and runs it again after processed_ttl" do
      lock = described_class.new(lock_ttl: 5, processed_ttl: 0.6)
      nested = nil
      first = lock.process("orders", "m-1") { nested = lock.process("orders", "m-1") { :never } }
      copy = lock.process("orders", "m-1") { :never }
      clock.advance(0.8)
      expect([first, nested, copy, lock.process("orders", "m-1") { :again }]).to eq(%i[ran in_progress processed ran])
    end

    it "lets the next copy run after the job raised" do
      lock = described_class.new
      expect { lock.process("orders", "m-2") { raise "boom" } }.to raise_error("boom")
      expect(lock.process("orders", "m-2") { :retried }).to eq(:ran)
    end

    it "deduplicates through the Shoryuken middleware" do
      middleware = Ferrolock::Shoryuken::Lock.new(enabled: true)
      runs = 0
      2.times { middleware.call(Object.new, "orders", TestingModeMessage.new("m-3")) { runs += 1 } }
      expect(runs).to eq(1)
    end
  end
end

RSpec.describe Ferrolock::Testing, "against Redis" do
  context "with real!" do
    it_behaves_like "a ferrolock backend", :real
  end

  context "with fake!" do
    it_behaves_like "a ferrolock backend", :fake
  end
end
