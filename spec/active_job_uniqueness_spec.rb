# frozen_string_literal: true

require "logger"
require "stringio"
require "active_job"
require "active_job/uniqueness"
require_relative "support/testing_scenarios"

# What the jobs of these examples ran, in order.
UQ_RAN = Queue.new unless defined?(UQ_RAN)

# ActiveJob::Uniqueness, ferrolock's drop-in for the activejob-uniqueness gem (0.4): the old gem's
# public behaviour (its specs rewritten: enqueuing, performing, keys, unlock!, configure, test_mode!,
# events and log lines) on ActiveJob's :test adapter, whose queue is run here as a worker would
# (ActiveJob::Base.execute on each payload), against the test Redis. Where ferrolock differs because
# the old gem is wrong (a retry_on retry keeps its lock, a raising perform frees it, a long job keeps
# its lock past lock_ttl, a real outage reaches on_redis_connection_error) the examples say so. The
# :async adapter and the mixed fleet: spec/active_job_uniqueness_async_spec.rb; real Sidekiq processes:
# spec/active_job_uniqueness_processes_spec.rb.
RSpec.describe "ActiveJob::Uniqueness (activejob-uniqueness drop-in)", time_limit: 30 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:log) { StringIO.new }
  let(:arguments) { [1, 2] }

  around do |example|
    previous = ActiveJob::Base.logger
    # ActiveJob 6.1 warns (deprecation) at each aborted perform unless the app chose 7.0's behaviour.
    skip_after = ActiveJob::Base.try(:skip_after_callbacks_if_terminated)
    ActiveJob::Base.skip_after_callbacks_if_terminated = true unless skip_after.nil?
    ActiveJob::Base.logger = Logger.new(log).tap { |logger| logger.level = Logger::DEBUG }
    ActiveJob::Uniqueness.instance_variable_set(:@config, nil)
    ActiveJob::Uniqueness.reset_manager!
    UQ_RAN.clear
    example.run
  ensure
    ActiveJob::Base.logger = previous
    ActiveJob::Base.skip_after_callbacks_if_terminated = skip_after unless skip_after.nil?
    ActiveJob::Uniqueness.instance_variable_set(:@config, nil)
    ActiveJob::Uniqueness.reset_manager!
  end

  # A job class on :test whose perform records its arguments (and runs `body`, if given).
  def job_class(name = "UqJob", &body)
    klass = Class.new(ActiveJob::Base) do
      self.queue_adapter = :test
      define_method(:perform) do |*args|
        UQ_RAN << args
        instance_exec(*args, &body) if body
      end
    end
    stub_const(name, klass)
  end

  def queue(klass) = klass.queue_adapter.enqueued_jobs
  def run_queued(klass) = ActiveJob::Base.execute(queue(klass).shift.transform_keys(&:to_s))
  def locks(pattern = "activejob_uniqueness:*") = redis.keys(pattern).sort

  def key_of(klass,
             args = arguments)
    ActiveJob::Uniqueness::LockKey.new(job_class_name: klass.name,
                                       arguments: args).lock_key
  end

  # Takes a job's lock as the old gem's Redlock does: SET NX PX with a random value.
  def redlock_set(key, ttl_ms = 60_000) = redis.call("SET", key, "redlock-#{rand(1 << 64)}", "NX", "PX", ttl_ms)

  describe "its keys" do
    # The arguments' hash keys sorted first (Ferrolock::ArgumentDigest, as DualLock): the old gem's key
    # byte for byte when they are in order (no hash here); see spec/argument_digest_spec.rb for hashes.
    it "are activejob_uniqueness:<class underscored>:<MD5 of the serialized arguments>, as the old gem's" do
      klass = job_class("Uq::SomeJob")
      serialized = ActiveSupport::JSON.encode(ActiveJob::Arguments.serialize([1, "a", ["b", 2]]))
      digest = OpenSSL::Digest::MD5.hexdigest(serialized)
      job = klass.new(1, "a", ["b", 2])
      expect(job.lock_key).to eq("activejob_uniqueness:uq/some_job:#{digest}")
      expect(job.runtime_lock_key).to eq("activejob_uniqueness:uq/some_job:#{digest}:runtime")
      expect(klass.new.lock_key).to eq("activejob_uniqueness:uq/some_job:no_arguments")
      expect(ActiveJob::Uniqueness::LockKey.new(job_class_name: "Uq::SomeJob").wildcard_key)
        .to eq("activejob_uniqueness:uq/some_job:*")
      expect(ActiveJob::Uniqueness::LockKey.new(job_class_name: "Uq::SomeJob",
                                                arguments: [1, "a", ["b", 2]]).wildcard_key)
        .to eq("activejob_uniqueness:uq/some_job:#{digest}*")
      expect do
        ActiveJob::Uniqueness::LockKey.new(arguments: [1])
      end.to raise_error(ArgumentError, /job_class_name is required/)
    end

    it "follow lock_prefix, digest_method, and a class's own lock_key_arguments and lock_key" do
      ActiveJob::Uniqueness.configure do |c|
        c.lock_prefix = "custom"
        c.digest_method = OpenSSL::Digest::SHA1
      end
      klass = job_class
      expect(klass.new(1).lock_key).to eq("custom:uq_job:#{OpenSSL::Digest.hexdigest("SHA1", "[1]")}")
      klass.define_method(:lock_key_arguments) { arguments.first(1) }
      expect(klass.new(1, 2).lock_key).to eq(klass.new(1, 3).lock_key)
      klass.define_method(:lock_key) { "mine:#{arguments.first}" }
      klass.unique :until_executed
      klass.perform_later(7, 8)
      expect(redis.keys("mine:*")).to eq(["mine:7"])
    end
  end

  %i[until_executing until_executed until_expired until_and_while_executing].each do |strategy|
    describe "enqueuing under :#{strategy}" do
      let(:klass) { job_class.tap { |k| k.unique strategy } }

      it "enqueues and locks the job for lock_ttl (a day by default, or the job's), logging Locked" do
        expect(klass.perform_later(*arguments)).to be_a(klass)
        expect(queue(klass).size).to eq(1)
        expect(locks).to eq([key_of(klass)])
        expect(redis.ttl(key_of(klass))).to be_within(2).of(86_400)
        expect(log.string).to match(/Locked UqJob \(Job ID: \S+\) \(Lock key: #{key_of(klass)}\) with arguments: 1, 2/)

        klass.unique strategy, lock_ttl: 3.hours
        klass.perform_later(5)
        expect(redis.ttl(key_of(klass, [5]))).to be_within(2).of(3 * 3600)
      end

      it "refuses a duplicate (on_conflict :raise by default, :log, or a proc), keeping the lock" do
        klass.perform_later(*arguments)
        expect do
          klass.perform_later(*arguments)
        end.to raise_error(ActiveJob::Uniqueness::JobNotUnique, /Not unique UqJob .*\[1, 2\]/)
        klass.unique strategy, on_conflict: :log
        expect(klass.perform_later(*arguments)).to be(false)
        line = /Not unique UqJob \(Job ID: \S+\) \(Lock key: #{key_of(klass)}\) with arguments: 1, 2/
        expect(log.string).to match(line)
        seen = []
        klass.unique strategy, on_conflict: ->(job) { seen << job.arguments }
        klass.perform_later(*arguments)
        expect(seen).to eq([arguments])
        expect(queue(klass).size).to eq(1)
        expect(locks).to eq([key_of(klass)])
      end

      it "refuses the same job enqueued twice (a producer's retry), outside its own perform" do
        job = klass.new(*arguments)
        expect(job.enqueue).to be(job)
        expect { job.enqueue }.to raise_error(ActiveJob::Uniqueness::JobNotUnique)
        expect(queue(klass).size).to eq(1)
      end

      it "refuses a job whose lock the old gem (Redlock: SET NX PX) holds" do
        redlock_set(key_of(klass))
        expect { klass.perform_later(*arguments) }.to raise_error(ActiveJob::Uniqueness::JobNotUnique)
        expect(queue(klass)).to be_empty
      end

      it "frees the lock when the adapter fails to enqueue, logging Locked then Unlocked" do
        allow(klass.queue_adapter).to receive(:enqueue).and_raise(IOError)
        result = begin
          klass.perform_later(*arguments)
        rescue IOError
          :raised
        end
        expect(result).to eq(:raised).or be(false) # ActiveJob 7.1+ returns false (EnqueueError) when it does not raise
        expect(locks).to be_empty
        expect(log.string).to match(/Locked UqJob.*\n(.*\n)*.*Unlocked UqJob/)
      end

      it "calls on_redis_connection_error on a real outage (Redis refused), else raises; nothing enqueued" do
        ActiveJob::Uniqueness.configure do |c|
          c.client = Ferrolock::Client.new(url: "redis://127.0.0.1:1", connect_timeout: 0.5)
        end
        expect { klass.perform_later(*arguments) }.to raise_error(Ferrolock::ConnectionError, /127\.0\.0\.1:1/)
        seen = []
        klass.unique strategy, on_redis_connection_error: lambda { |job, resource:, error:|
                                                            seen << [job.class, resource, error.class]
                                                          }
        expect(klass.perform_later(*arguments)).to be(false)
        expect(seen).to eq([[klass, key_of(klass), Ferrolock::ConnectionError]])
        expect(queue(klass)).to be_empty
      end
    end
  end

  describe "enqueuing under :while_executing" do
    it "enqueues duplicates and locks nothing" do
      klass = job_class.tap { |k| k.unique :while_executing }
      2.times { klass.perform_later(*arguments) }
      expect(queue(klass).size).to eq(2)
      expect(locks).to be_empty
    end
  end

  describe "performing" do
    it ":until_executing frees the lock before perform" do
      spec = self
      klass = job_class { |*| UQ_RAN << spec.locks }
      klass.unique :until_executing
      klass.perform_later(*arguments)
      run_queued(klass)
      expect(UQ_RAN.pop(true)).to eq(arguments)
      expect(UQ_RAN.pop(true)).to eq([])
      expect(log.string).to match(/Unlocked UqJob/)
    end

    it ":until_executed holds the lock while performing and frees it after" do
      spec = self
      klass = job_class { |*| UQ_RAN << spec.locks }
      klass.unique :until_executed
      klass.perform_later(*arguments)
      run_queued(klass)
      expect([UQ_RAN.pop(true), UQ_RAN.pop(true)]).to eq([arguments, [key_of(klass)]])
      expect(locks).to be_empty
      expect(klass.perform_later(*arguments)).to be_a(klass)
    end

    it ":until_executed frees the lock after a raising perform (the old gem kept it for lock_ttl)" do
      klass = job_class { |*| raise ArgumentError, "boom" }
      klass.unique :until_executed
      klass.perform_later(*arguments)
      expect { run_queued(klass) }.to raise_error(ArgumentError, "boom")
      expect(locks).to be_empty
    end

    it ":until_expired keeps the lock after perform" do
      klass = job_class.tap { |k| k.unique :until_expired, lock_ttl: 60 }
      klass.perform_later(*arguments)
      run_queued(klass)
      expect(locks).to eq([key_of(klass)])
      expect(redis.ttl(key_of(klass))).to be_within(2).of(60)
    end

    it ":until_and_while_executing swaps the enqueue lock for a runtime lock while performing" do
      spec = self
      klass = job_class { |*| UQ_RAN << spec.locks }
      klass.unique :until_and_while_executing, runtime_lock_ttl: 20
      klass.perform_later(*arguments)
      run_queued(klass)
      expect([UQ_RAN.pop(true), UQ_RAN.pop(true)]).to eq([arguments, ["#{key_of(klass)}:runtime"]])
      expect(locks).to be_empty
      expect(log.string).to match(/Locked runtime UqJob.*\n(.*\n)*.*Unlocked runtime UqJob/)
    end

    it ":until_and_while_executing lets one more wait while one runs; a runtime conflict follows on_runtime_conflict" do
      klass = job_class
      klass.unique :until_and_while_executing, on_runtime_conflict: :log
      klass.perform_later(*arguments)
      redlock_set("#{key_of(klass)}:runtime") # another worker runs one now
      run_queued(klass)
      expect(UQ_RAN).to be_empty
      expect(log.string).to match(/Not unique runtime UqJob/)
      expect(locks).to eq(["#{key_of(klass)}:runtime"]) # the enqueue lock was freed: the next may queue
      expect(klass.perform_later(*arguments)).to be_a(klass)

      klass.unique :until_and_while_executing # on_runtime_conflict defaults to on_conflict (:raise)
      expect { run_queued(klass) }.to raise_error(ActiveJob::Uniqueness::JobNotUnique, /Not unique runtime/)
    end

    it ":while_executing runs one at a time per key: a duplicate starting meanwhile is a runtime conflict" do
      spec = self
      klass = job_class { |*| UQ_RAN << spec.locks }
      klass.unique :while_executing, on_conflict: :log
      2.times { klass.perform_later(*arguments) }
      run_queued(klass)
      expect([UQ_RAN.pop(true), UQ_RAN.pop(true)]).to eq([arguments, [key_of(klass)]])
      expect(locks).to be_empty

      redlock_set(key_of(klass))
      run_queued(klass)
      expect(UQ_RAN).to be_empty
      expect(log.string).to match(/Not unique runtime UqJob/)
    end

    it "keeps a long job's lock past lock_ttl: it is a lease renewed while the job runs (the old gem's expired)" do
      klass = job_class { |*| sleep 2.5 }
      klass.unique :until_executed, lock_ttl: 1
      klass.perform_later(*arguments)
      runner = Thread.new { run_queued(klass) }
      sleep 1.8 # past lock_ttl while the job runs
      expect { klass.perform_later(*arguments) }.to raise_error(ActiveJob::Uniqueness::JobNotUnique)
      runner.join
      expect(locks).to be_empty
    end
  end

  describe "a job that fails before it performs (the old gem kept its lock for lock_ttl)" do
    it "frees its enqueue lock when its class is missing in the worker, or its record is gone" do
      warnings = StringIO.new
      previous = Ferrolock.config.logger
      Ferrolock.config.logger = Logger.new(warnings)
      klass = job_class.tap { |k| k.unique :until_executed }
      klass.perform_later(*arguments)
      payload = queue(klass).shift.transform_keys(&:to_s).merge("job_class" => "UqNoSuchJob")
      expect { ActiveJob::Base.execute(payload) }.to raise_error(NameError)
      expect(locks).to be_empty

      stub_const("UqRecord", Class.new { def self.find(_id) = raise(ArgumentError, "gone") })
      klass.perform_later(1)
      payload = queue(klass).shift.transform_keys(&:to_s)
      payload["arguments"] = [{ "_aj_globalid" => "gid://app/UqRecord/1" }] # (its lock is [1]'s, in the payload)
      expect { ActiveJob::Base.execute(payload) }.to raise_error(ActiveJob::DeserializationError)
      expect(locks).to be_empty
      expect(warnings.string).to include("UqNoSuchJob ")
        .and include("failed before it performed (ActiveJob::DeserializationError").and include("is freed")
    ensure
      Ferrolock.config.logger = previous
    end

    it "keeps an until_expired lock, and one another job holds" do
      klass = job_class.tap { |k| k.unique :until_expired }
      klass.perform_later(*arguments)
      payload = queue(klass).shift.transform_keys(&:to_s).merge("job_class" => "UqNoSuchJob")
      expect { ActiveJob::Base.execute(payload) }.to raise_error(NameError)
      expect(locks).to eq([key_of(klass)])
    end
  end

  describe "retry_on (ferrolock keeps the job's own lock; the old gem's retry was JobNotUnique: its #75)" do
    it ":until_executed: the retry is enqueued under the same lock and frees it when it succeeds" do
      klass = job_class { |*| raise IOError, "first try" if UQ_RAN.size == 1 }
      klass.retry_on IOError, wait: 0, attempts: 3
      klass.unique :until_executed
      klass.perform_later(*arguments)
      job_id = queue(klass).first["job_id"]
      run_queued(klass) # raises, retry_on enqueues the retry
      expect(queue(klass).size).to eq(1)
      expect(redis.get(key_of(klass))).to eq(job_id)
      expect(redis.ttl(key_of(klass))).to be_within(2).of(86_400) # queued again: lock_ttl, not the lease
      expect { klass.perform_later(*arguments) }.to raise_error(ActiveJob::Uniqueness::JobNotUnique)
      run_queued(klass)
      expect(UQ_RAN.size).to eq(2)
      expect(locks).to be_empty
    end

    %i[until_executing until_and_while_executing while_executing].each do |strategy|
      it ":#{strategy}: the retry is enqueued and runs" do
        klass = job_class { |*| raise IOError, "first try" if UQ_RAN.size == 1 }
        klass.retry_on IOError, wait: 0, attempts: 3
        klass.unique strategy
        klass.perform_later(*arguments)
        run_queued(klass)
        run_queued(klass)
        expect(UQ_RAN.size).to eq(2)
        expect(locks).to be_empty
      end
    end
  end

  describe "a Rails 8.1 continuation (ActiveJob::Continuable)" do
    it "resumes under its own lock: an interrupted until_executed job re-enqueues itself, a duplicate is refused" do
      skip "ActiveJob #{ActiveJob.version} has no continuations (FERROLOCK_RAILS=8.1 runs them)" unless
        defined?(ActiveJob::Continuable)
      adapter = stub_const("UqStoppingAdapter", Class.new(ActiveJob::QueueAdapters::TestAdapter) do
        attr_accessor :stopping

        def stopping? = stopping == true
      end).new
      klass = job_class
      klass.include(ActiveJob::Continuable)
      klass.queue_adapter = adapter
      klass.define_method(:perform) do |*|
        step(:one) { UQ_RAN << :one }
        step(:two) { UQ_RAN << :two }
      end
      klass.unique :until_executed, on_conflict: :log
      job = klass.perform_later(*arguments)
      adapter.stopping = true # the worker is shutting down: the job stops at its next step
      run_queued(klass)
      expect(queue(klass).size).to eq(1) # resumed: enqueued again, same job_id
      expect(queue(klass).first["job_id"]).to eq(job.job_id)
      expect(redis.get(key_of(klass))).to eq(job.job_id)
      expect(klass.perform_later(*arguments)).to be(false)
      adapter.stopping = false
      run_queued(klass)
      expect([UQ_RAN.pop(true), UQ_RAN.pop(true)]).to eq(%i[one two])
      expect(locks).to be_empty
    end
  end

  describe "unlock!" do
    it "deletes a class's locks, one job's (its runtime lock too), or every lock" do
      one = job_class("UqOneJob").tap { |k| k.unique :until_expired }
      two = job_class("UqTwoJob").tap { |k| k.unique :until_expired }
      one.perform_later(1)
      one.perform_later(2)
      two.perform_later(1)
      redlock_set("#{key_of(one, [1])}:runtime")
      expect(locks.size).to eq(4)
      UqOneJob.unlock!(1)
      expect(locks).to eq([key_of(one, [2]), key_of(two, [1])].sort)
      ActiveJob::Uniqueness.unlock!(job_class_name: "UqOneJob")
      expect(locks).to eq([key_of(two, [1])])
      redis.set("unrelated", "1")
      ActiveJob::Uniqueness.unlock!
      expect(redis.keys("*")).to eq(["unrelated"])
    end
  end

  describe "configuration" do
    it "validates actions and strategies with the old gem's errors, and takes custom strategies" do
      expect { ActiveJob::Uniqueness.configure { |c| c.on_conflict = :die } }
        .to raise_error(ActiveJob::Uniqueness::InvalidOnConflictAction, /Unexpected 'die' action on conflict/)
      expect { ActiveJob::Uniqueness.configure { |c| c.on_redis_connection_error = :log } }
        .to raise_error(ActiveJob::Uniqueness::InvalidOnConflictAction)
      klass = job_class
      expect do
        klass.unique :until_executed, on_conflict: :die
      end.to raise_error(ActiveJob::Uniqueness::InvalidOnConflictAction)
      expect do
        klass.unique :until_executed,
                     on_runtime_conflict: :die
      end.to raise_error(ActiveJob::Uniqueness::InvalidOnConflictAction)
      expect do
        klass.unique :until_executed,
                     on_redis_connection_error: :log
      end.to raise_error(ActiveJob::Uniqueness::InvalidOnConflictAction)
      expect do
        klass.unique :nope
      end.to raise_error(ActiveJob::Uniqueness::StrategyNotFound, /Strategy 'nope' is not found/)
      expect { klass.unique :base }.to raise_error(ActiveJob::Uniqueness::StrategyNotFound)

      custom = Class.new(ActiveJob::Uniqueness::Strategies::Base) do
        def before_enqueue
          lock(resource: "#{lock_key}:mine", ttl: lock_ttl)
        end
      end
      ActiveJob::Uniqueness.configure { |c| c.lock_strategies = { mine: custom } }
      klass.unique :mine
      klass.perform_later(1)
      expect(locks).to eq(["#{key_of(klass, [1])}:mine"])
    end

    it "maps one redlock_servers URL to its own client, warns of a quorum and of redlock_options" do
      warnings = StringIO.new
      previous = Ferrolock.config.logger
      Ferrolock.config.logger = Logger.new(warnings)
      ActiveJob::Uniqueness.configure { |c| c.redlock_servers = [FerrolockTest.redis_server.url] }
      expect(ActiveJob::Uniqueness.config.client.redacted_url).to eq(FerrolockTest.redis_server.url)
      job_class.tap { |k| k.unique :until_executed }.perform_later(1)
      expect(locks.size).to eq(1)
      ActiveJob::Uniqueness.configure do |c|
        c.redlock_servers = %w[redis://a:6379 redis://b:6379]
        c.redlock_options = { retry_count: 3 }
      end
      expect(ActiveJob::Uniqueness.config.client).to be(Ferrolock.client)
      expect(warnings.string).to include("ferrolock locks on one Redis").and include("redlock_options")
    ensure
      Ferrolock.config.logger = previous
    end
  end

  it "test_mode! grants every lock and stores nothing; reset_manager! goes back to Redis" do
    klass = job_class.tap { |k| k.unique :until_executed }
    ActiveJob::Uniqueness.test_mode!
    2.times { klass.perform_later(*arguments) }
    expect(queue(klass).size).to eq(2)
    expect(locks).to be_empty
    ActiveJob::Uniqueness.reset_manager!
    klass.perform_later(*arguments)
    expect(locks).to eq([key_of(klass)])
  end

  describe "under Ferrolock::Testing" do
    # Runs the block in `mode` as the testing-mode specs run their examples (TestingModes.around).
    def in_mode(mode, &block)
      FerrolockTest::TestingModes.around(Struct.new(:body) { def run = body.call }.new(block), mode)
    end

    it "holds its locks in memory in fake! mode" do
      klass = job_class.tap { |k| k.unique :until_executed, on_conflict: :log }
      in_mode(:fake) do
        expect(klass.perform_later(1)).to be_a(klass)
        expect(klass.perform_later(1)).to be(false)
        run_queued(klass)
        expect(klass.perform_later(1)).to be_a(klass)
      end
      expect(locks).to be_empty
    end

    it "grants every lock in disable! mode" do
      klass = job_class.tap { |k| k.unique :until_executed, on_conflict: :log }
      in_mode(:disabled) { 2.times { expect(klass.perform_later(2)).to be_a(klass) } }
      expect(locks).to be_empty
    end
  end

  it "instruments the old gem's events (<event>.active_job_uniqueness) with job, resource and ttl" do
    events = []
    subscriber = ActiveSupport::Notifications.subscribe(/\.active_job_uniqueness\z/) do |name, *, payload|
      events << [name, payload[:resource], payload[:ttl], payload[:job].class]
    end
    klass = job_class.tap { |k| k.unique :until_and_while_executing, on_conflict: :log, lock_ttl: 100 }
    klass.perform_later(*arguments)
    klass.perform_later(*arguments)
    run_queued(klass)
    key = key_of(klass)
    expect(events).to eq([
                           ["lock.active_job_uniqueness", key, 100_000, klass],
                           ["conflict.active_job_uniqueness", key, nil, klass],
                           ["unlock.active_job_uniqueness", key, nil, klass],
                           ["runtime_lock.active_job_uniqueness", "#{key}:runtime", 30_000, klass],
                           ["runtime_unlock.active_job_uniqueness", "#{key}:runtime", nil, klass]
                         ])
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber) if subscriber
  end

  describe "a rolling deploy (jobs the old gem enqueued, performed by ferrolock)" do
    # The old gem's payload: no ferrolock mark, its lock holds Redlock's random value.
    def old_gem_enqueue(klass)
      klass.queue_adapter.enqueued_jobs << klass.new(*arguments).serialize.except("ferrolock_unique")
      redlock_set(key_of(klass))
    end

    %i[until_executing until_executed until_and_while_executing].each do |strategy|
      it ":#{strategy} frees the old gem's lock for the job it performs" do
        klass = job_class.tap { |k| k.unique strategy }
        old_gem_enqueue(klass)
        run_queued(klass)
        expect(UQ_RAN.size).to eq(1)
        expect(locks).to be_empty
      end
    end

    it "a job ferrolock enqueued never frees a lock another job took after its own expired" do
      klass = job_class.tap { |k| k.unique :until_executed, lock_ttl: 1 }
      klass.perform_later(*arguments)
      redis.del(key_of(klass)) # its lock expired while it queued ...
      redlock_set(key_of(klass)) # ... and a duplicate took the key
      run_queued(klass)
      expect(UQ_RAN.size).to eq(1)
      expect(locks).to eq([key_of(klass)])
    end
  end
end
