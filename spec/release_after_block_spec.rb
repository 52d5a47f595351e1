# frozen_string_literal: true

require "logger"
require "sidekiq"

# Issue 24, item 4: Redis failing (here: stopped by SIGSTOP) once a block is over. A block that
# finished is not turned into an error (Sidekiq would run the job again): the failed release is
# logged and evented (:release_failed), and what was held expires by itself. A block that raised
# keeps its own exception.
RSpec.describe "a release failing after the block" do
  let(:server) { FerrolockTest.redis_server }
  # A short read_timeout: the stalled release fails after 0.5 s.
  let(:client) { Ferrolock::Client.new(url: server.url, read_timeout: 0.5) }
  let(:log) { StringIO.new }
  let(:events) { [] }

  around do |example|
    logger = Ferrolock.config.logger
    Ferrolock.config.logger = Logger.new(log)
    subscription = Ferrolock.subscribe(:release_failed) { |_, payload| events << payload }
    example.run
  ensure
    server.resume
    Ferrolock.unsubscribe(subscription)
    Ferrolock.config.logger = logger
  end

  # The keys of names matching `names` that hold something (a DistMutex's fencing counter outlives
  # its holds on purpose). Names: an earlier example's background mark may land after the flush.
  def keys(names)
    server.redis.keys("ferrolock:{#{names}}:*").reject { |key| key.end_with?(":fence") }
  end

  # Redis comes back: what the block held is gone within `within` seconds (released in the
  # background or expired), and nothing was left without a TTL meanwhile.
  def nothing_held_after_resume(names, within:)
    server.resume
    expect(keys(names).map { |k| server.redis.pttl(k) }).not_to include(-1)
    wait_until(timeout: within, what: -> { "keys gone (left: #{keys(names)})" }) { keys(names).empty? }
  end

  def reported!(primitive, block)
    expect(events.map { |e| e.values_at(:primitive, :block, :error) })
      .to eq([[primitive, block, "Ferrolock::ConnectionError"]])
    expect(log.string).to match(/WARN.*release failed after the block #{block}/)
  end

  describe "DistMutex#synchronize" do
    let(:mutex) { Ferrolock::DistMutex.new("after:mutex", lease: 3, client: client) }

    it "returns the block's value and lets the lock expire" do
      expect(mutex.synchronize { server.pause && :done }).to eq(:done)
      reported!(:dist_mutex, :finished)
      nothing_held_after_resume("after:mutex", within: 4)
    end

    it "raises the block's own exception" do
      expect { mutex.synchronize { server.pause && raise(ArgumentError, "the block's own") } }
        .to raise_error(ArgumentError, "the block's own")
      reported!(:dist_mutex, :raised)
    end

    it "still raises from the explicit unlock, as Mutex#unlock would" do
      mutex.lock
      server.pause
      expect { mutex.unlock }.to raise_error(Ferrolock::ConnectionError)
      expect(mutex.owned?).to be(false)
      nothing_held_after_resume("after:mutex", within: 4)
    end
  end

  describe "ConcurrentLimiter#within_limit" do
    let(:limiter) { Ferrolock::ConcurrentLimiter.new("after:limiter", 1, lock_timeout: 3, client: client) }

    it "returns the block's value and frees the slot" do
      expect(limiter.within_limit { server.pause && :done }).to eq(:done)
      reported!(:concurrent_limiter, :finished)
      server.resume
      wait_until(timeout: 4) { limiter.status[:in_use].zero? }
    end

    it "raises the block's own exception" do
      expect { limiter.within_limit { server.pause && raise(ArgumentError, "the block's own") } }
        .to raise_error(ArgumentError, "the block's own")
      reported!(:concurrent_limiter, :raised)
    end
  end

  describe "DualLock#run" do
    let(:lock) { Ferrolock::DualLock.new("after:dual", wait_ttl: 3, exec_ttl: 3, client: client) }

    it "returns true and lets the key expire" do
      expect(lock.run { server.pause }).to be(true)
      reported!(:dual_lock, :finished)
      nothing_held_after_resume("after:dual", within: 4)
    end

    it "raises the block's own exception" do
      expect { lock.run { server.pause && raise(ArgumentError, "the block's own") } }
        .to raise_error(ArgumentError, "the block's own")
      reported!(:dual_lock, :raised)
    end
  end

  describe "Shoryuken MessageLock#process" do
    let(:lock) { Ferrolock::Shoryuken::MessageLock.new(lock_ttl: 3, client: client) }

    it "returns :ran, and a redelivery does not run the message again" do
      expect(lock.process("orders", "m1") { server.pause }).to eq(:ran)
      finished = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      reported!(:message_lock, :finished)
      server.resume
      # The mark is sent again in the background; a copy meanwhile is left (:in_progress).
      expect(%i[in_progress processed]).to include(lock.process("orders", "m1") { raise "ran twice" })
      wait_until(timeout: 4) { server.redis.get(lock.state_key("orders", "m1")) == "processed" }
      expect(lock.process("orders", "m1") { raise "ran twice" }).to eq(:processed)
      # The mark that landed may have been the stalled first try; the background one is repeated
      # until answered, up to lease after the block: let it end here, not write the mark again
      # after a later example's flush.
      sleep([finished + lock.lease + 0.2 - Process.clock_gettime(Process::CLOCK_MONOTONIC), 0].max)
    end

    it "raises the block's own exception" do
      expect { lock.process("orders", "m2") { server.pause && raise(ArgumentError, "the block's own") } }
        .to raise_error(ArgumentError, "the block's own")
      reported!(:message_lock, :raised)
    end
  end

  describe "the Sidekiq DualLock and Limiter middlewares" do
    let(:job_class) do
      klass = Class.new do
        include Sidekiq::Worker
        def self.name = "AfterBlockDualJob"
      end
      klass.sidekiq_options(dual_lock: { wait_ttl: 3, exec_ttl: 3 })
      stub_const("AfterBlockDualJob", klass)
    end
    let(:job) { { "class" => "AfterBlockDualJob", "jid" => "jid-dual", "args" => [7], "queue" => "default" } }
    let(:limiter) { Ferrolock::ConcurrentLimiter.new("after:mw-limiter", 1, lock_timeout: 3, client: client) }

    # The chain a job runs through: LimiterMiddleware, DualLock::Middleware, then the job (which uses
    # a ConcurrentLimiter, as a Sidekiq Enterprise limiter job does).
    def run_job(&work)
      dual = Ferrolock::Sidekiq::DualLock::Middleware.new(client: client)
      Ferrolock::Sidekiq::LimiterMiddleware.new.call(job_class.new, job, "default") do
        dual.call(job_class.new, job, "default") { limiter.within_limit(&work) }
      end
    end

    it "does not fail a job that succeeded, and its locks go away" do
      ran = 0
      expect { run_job { ran += 1 if server.pause } }.not_to raise_error
      expect(ran).to eq(1)
      expect(events.map { |e| e.values_at(:primitive, :block) })
        .to contain_exactly(%i[concurrent_limiter finished], %i[dual_lock finished])
      nothing_held_after_resume("*AfterBlockDualJob*", within: 5)
      wait_until(timeout: 5) { limiter.status[:in_use].zero? }
    end

    it "keeps a failed job's own exception" do
      expect { run_job { server.pause && raise(ArgumentError, "the job's own") } }
        .to raise_error(ArgumentError, "the job's own")
      expect(events.map { |e| e[:block] }).to eq(%i[raised raised])
    end
  end

  describe "the Sidekiq uniqueness server middleware" do
    def job_for(lock)
      klass = Class.new do
        include Sidekiq::Worker
        def self.name = "AfterBlockJob"
      end
      klass.sidekiq_options(lock: lock, lock_lease: 3)
      stub_const("AfterBlockJob", klass)
      [klass, { "class" => "AfterBlockJob", "jid" => "jid-#{lock}", "args" => [1], "queue" => "default" }]
    end

    def run_job(lock, &block)
      klass, job = job_for(lock)
      middleware = Ferrolock::Sidekiq::Unique::ServerMiddleware.new(client: client)
      middleware.call(klass.new, job, "default", &block)
    end

    %i[until_executed while_executing until_and_while_executing].each do |lock|
      it "#{lock}: a job that succeeded is not failed (no retry), and its lock expires" do
        ran = 0
        expect { run_job(lock) { ran += 1 if server.pause } }.not_to raise_error
        expect(ran).to eq(1)
        expect(events.size).to eq(1)
        expect(events.first[:block]).to eq(:finished)
        nothing_held_after_resume("unique:AfterBlockJob*", within: 5)
      end

      it "#{lock}: a job that raised keeps its exception" do
        expect { run_job(lock) { server.pause && raise(ArgumentError, "the job's own") } }
          .to raise_error(ArgumentError, "the job's own")
        expect(events.map { |e| e[:block] }).to eq([:raised])
      end
    end
  end
end
