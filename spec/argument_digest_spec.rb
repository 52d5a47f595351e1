# frozen_string_literal: true

require "sidekiq"
require "logger"
require "stringio"
require "active_job"
require "active_job/uniqueness"
require "active_job/arguments"
require "openssl"

# One rule for "the same arguments" in every lock key (Ferrolock::ArgumentDigest): hash keys sorted,
# recursively. And the upgrade from uniqueness' older rule (arguments as given): a lock taken under
# the older key by a process not yet upgraded is still seen, against the test Redis.
class DigestSpecDualJob
  include Sidekiq::Worker
  sidekiq_options dual_lock: true
  def perform(*); end
end

class DigestSpecUniqueJob
  include Sidekiq::Worker
  sidekiq_options lock: :until_executed
  def perform(*); end
end

class DigestSpecWhileJob
  include Sidekiq::Worker
  sidekiq_options lock: :while_executing, on_conflict: :log
  def perform(*); end
end

class DigestSpecUntilAndWhileJob
  include Sidekiq::Worker
  sidekiq_options lock: :until_and_while_executing, on_conflict: :log, wait_timeout: 0.5
  def perform(*); end
end

RSpec.describe Ferrolock::ArgumentDigest, time_limit: 30 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:sorted) { [1, { "a" => 1, "b" => { "c" => 3, "d" => [{ "e" => 5, "f" => 6 }] } }] }
  let(:unsorted) { [1, { "b" => { "d" => [{ "f" => 6, "e" => 5 }], "c" => 3 }, "a" => 1 }] }

  def payload(klass, args, jid = "jid-#{rand(1 << 64)}")
    { "class" => klass.name, "args" => args, "jid" => jid, "queue" => "default" }
  end

  def unique_settings = Ferrolock::Sidekiq::Unique::Settings.for(DigestSpecUniqueJob, {})

  # The uniqueness digest by the rule before ArgumentDigest: the arguments' JSON as given.
  def old_unique_digest(args)
    "unique:DigestSpecUniqueJob:#{Digest::SHA256.hexdigest(JSON.generate(["default", args]))}"
  end

  it "sorts hash keys recursively, keeps array order, and says when a value was out of order" do
    expect(JSON.generate(described_class.canonical(unsorted))).to eq(JSON.generate(sorted))
    expect(described_class.canonical([2, 1])).to eq([2, 1])
    expect([described_class.ordered?(sorted), described_class.ordered?(unsorted)]).to eq([true, false])
    expect(described_class.sha256({ a: 1, b: 2 })).to eq(described_class.sha256({ b: 2, a: 1 }))
  end

  it "sorts ActiveJob's list of a hash's symbol keys, a set" do
    one = ActiveJob::Arguments.serialize([{ a: 1, b: 2 }])
    two = ActiveJob::Arguments.serialize([{ b: 2, a: 1 }])
    expect(JSON.generate(described_class.canonical(one))).to eq(JSON.generate(described_class.canonical(two)))
  end

  it "gives {a: 1, b: 2} and {b: 2, a: 1} one key in DualLock and in Sidekiq and ActiveJob uniqueness" do
    dual = Ferrolock::Sidekiq::DualLock::Settings.for(DigestSpecDualJob)
    expect(dual.key_for([{ "a" => 1, "b" => 2 }])).to eq(dual.key_for([{ "b" => 2, "a" => 1 }]))
    expect(dual.key_for([{ a: 1, b: 2 }])).to eq(dual.key_for([{ b: 2, a: 1 }]))

    unique = ->(args) { Ferrolock::Sidekiq::Unique::Digest.for(unique_settings, payload(DigestSpecUniqueJob, args)) }
    expect(unique.call([{ "a" => 1, "b" => 2 }])).to eq(unique.call([{ "b" => 2, "a" => 1 }]))

    key = ->(args) { ActiveJob::Uniqueness::LockKey.new(job_class_name: "DigestSpecJob", arguments: args).lock_key }
    expect(key.call([{ a: 1, b: 2 }])).to eq(key.call([{ b: 2, a: 1 }]))
    expect(key.call([{ "a" => 1, "b" => 2 }])).to eq(key.call([{ "b" => 2, "a" => 1 }]))
  end

  it "keeps every key of arguments already in order byte for byte (no legacy key then)" do
    settings = unique_settings
    digest, legacy = Ferrolock::Sidekiq::Unique::Digest.with_legacy(settings, payload(DigestSpecUniqueJob, sorted))
    expect([digest, legacy]).to eq([old_unique_digest(sorted), nil])
    _, legacy = Ferrolock::Sidekiq::Unique::Digest.with_legacy(settings, payload(DigestSpecUniqueJob, unsorted))
    expect(legacy).to eq(old_unique_digest(unsorted))

    in_order = ActiveJob::Uniqueness::LockKey.new(job_class_name: "DigestSpecJob", arguments: [1, ["a"]])
    old = OpenSSL::Digest::MD5.hexdigest(ActiveSupport::JSON.encode(ActiveJob::Arguments.serialize([1, ["a"]])))
    expect([in_order.lock_key, in_order.legacy_lock_key]).to eq(["activejob_uniqueness:digest_spec_job:#{old}", nil])
    out_of_order = ActiveJob::Uniqueness::LockKey.new(job_class_name: "DigestSpecJob", arguments: [{ b: 2, a: 1 }])
    old = OpenSSL::Digest::MD5.hexdigest(ActiveSupport::JSON.encode(ActiveJob::Arguments.serialize([{ b: 2, a: 1 }])))
    expect(out_of_order.legacy_lock_key).to eq("activejob_uniqueness:digest_spec_job:#{old}")
  end

  describe "upgrade: a lock under the older key, against Redis" do
    let(:log) { StringIO.new }

    around do |example|
      logger = Ferrolock.config.logger
      Ferrolock.config.logger = Logger.new(log)
      example.run
    ensure
      Ferrolock.config.logger = logger
      redis.call("FLUSHDB")
    end

    def push(args, jid = "jid-new")
      job = payload(DigestSpecUniqueJob, args, jid)
      Ferrolock::Sidekiq::Unique::ClientMiddleware.new.call(DigestSpecUniqueJob, job, "default") { :pushed }
    end

    it "Sidekiq uniqueness: a push meets a duplicate locked by the older rule, and pushes once it is freed" do
      old_lock = Ferrolock::Sidekiq::Unique::Lock.new(old_unique_digest(unsorted))
      expect(old_lock.take("jid-old", 30)).to be_nil # as a process on the older rule pushes
      expect(push(unsorted)).not_to eq(:pushed)
      expect(log.string).to include("jid-old")
      expect(old_lock.release("jid-old")).to be(true)
      expect(push(unsorted)).to eq(:pushed)
      digest = Ferrolock::Sidekiq::Unique::Digest.for(unique_settings, payload(DigestSpecUniqueJob, sorted))
      expect(Ferrolock::Sidekiq::Unique::Lock.new(digest).holder).to eq("jid-new")
    end

    it "Sidekiq uniqueness: the job that holds the older key itself (pushed again) moves to the new one" do
      Ferrolock::Sidekiq::Unique::Lock.new(old_unique_digest(unsorted)).take("jid-same", 30)
      expect(push(unsorted, "jid-same")).to eq(:pushed)
      expect(Ferrolock::Sidekiq::Unique::Lock.new(old_unique_digest(unsorted)).holder).to be_nil
    end

    it "Sidekiq while_executing: a duplicate running under the older rule's run lock is a conflict" do
      settings = Ferrolock::Sidekiq::Unique::Settings.for(DigestSpecWhileJob, {})
      job = payload(DigestSpecWhileJob, unsorted)
      digest, legacy = Ferrolock::Sidekiq::Unique::Digest.with_legacy(settings, job)
      run_lock = ->(name) { Ferrolock::DistMutex.new(Ferrolock::InternalName.new("#{name}:run")) }
      running = run_lock.call(legacy) # as a worker still on the older rule runs its duplicate
      running.lock
      ran = []
      middleware = Ferrolock::Sidekiq::Unique::ServerMiddleware.new
      Thread.new { middleware.call(DigestSpecWhileJob.new, job, "default") { ran << 1 } }.join
      expect(ran).to eq([])
      expect(run_lock.call(digest).locked?).to be(false) # its own run lock given back
      running.unlock
      middleware.call(DigestSpecWhileJob.new, job, "default") { ran << 2 }
      expect(ran).to eq([2])
    end

    it "Sidekiq until_and_while_executing: waits while a duplicate runs under the older rule's DualLock" do
      settings = Ferrolock::Sidekiq::Unique::Settings.for(DigestSpecUntilAndWhileJob, {})
      job = payload(DigestSpecUntilAndWhileJob, unsorted)
      _, legacy = Ferrolock::Sidekiq::Unique::Digest.with_legacy(settings, job)
      older = Ferrolock::DualLock.new(Ferrolock::InternalName.new("#{legacy}:run"))
      middleware = Ferrolock::Sidekiq::Unique::ServerMiddleware.new
      ran = Queue.new
      running = Queue.new
      finish = Queue.new
      hold_older = -> { Thread.new { older.run { (running << 1).then { finish.pop } } } }
      # As a worker still on the older rule runs its duplicate: this job waits for it, then runs.
      runner = hold_older.call
      running.pop
      waiter = Thread.new do
        middleware.call(DigestSpecUntilAndWhileJob.new, job, "default") { ran << older.executing? }
      end
      sleep 0.2
      expect(ran.size).to eq(0)
      finish << 1
      [runner, waiter].each(&:join)
      expect(ran.pop).to be(false) # it ran only after the older rule's duplicate finished
      # Running past wait_timeout (0.5 s): on_conflict (:log here), the job does not run.
      runner = hold_older.call
      running.pop
      middleware.call(DigestSpecUntilAndWhileJob.new, job, "default") { ran << :ran }
      finish << 1
      runner.join
      expect(ran.size).to eq(0)
      expect(log.string).to include("skip")
    end

    it "ActiveJob uniqueness: an enqueue meets a lock under the older key; the job's unlock frees both" do
      stub_const("DigestSpecJob", Class.new(ActiveJob::Base) do
        self.queue_adapter = :test
        unique :until_executed, on_conflict: :log
        def perform(*); end
      end)
      ActiveJob::Uniqueness.reset_manager!
      legacy = DigestSpecJob.new({ b: 2, a: 1 }).lock_key_generator.legacy_lock_key
      redis.call("SET", legacy, "old-job-id", "PX", 60_000) # as the older rule's enqueue took it
      expect(DigestSpecJob.perform_later({ b: 2, a: 1 })).to be(false)
      expect(DigestSpecJob.queue_adapter.enqueued_jobs).to be_empty

      redis.call("SET", legacy, "held-by-me", "PX", 60_000)
      job = DigestSpecJob.new({ b: 2, a: 1 })
      job.job_id = "held-by-me" # a job enqueued before the upgrade, performed after it
      job.lock_strategy.send(:unlock, resource: job.lock_key)
      expect(redis.call("EXISTS", legacy)).to eq(0)
      expect(DigestSpecJob.perform_later({ b: 2, a: 1 })).not_to be(false)
      expect(redis.call("EXISTS", DigestSpecJob.new({ a: 1, b: 2 }).lock_key)).to eq(1)
      ActiveJob::Uniqueness.unlock!(job_class_name: "DigestSpecJob", arguments: [{ b: 2, a: 1 }])
      expect(redis.keys("activejob_uniqueness:*")).to eq([])
    end
  end
end
