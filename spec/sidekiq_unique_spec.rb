# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"
require_relative "fixtures/unique_jobs"

RSpec.describe "Ferrolock::Sidekiq unique middlewares" do
  let(:app) { "spec/fixtures/unique_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }

  before(:all) do
    middleware = Ferrolock::Sidekiq::Unique::ClientMiddleware
    FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.add middleware unless chain.exists?(middleware) }
  end

  after(:all) do
    FerrolockTest::SidekiqVersion.client_middleware do |chain|
      chain.remove(Ferrolock::Sidekiq::Unique::ClientMiddleware)
    end
  end

  let(:log) { StringIO.new }

  before do
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
    @logger = Ferrolock.config.logger
    Ferrolock.config.logger = Logger.new(log)
  end

  after { Ferrolock.config.logger = @logger }

  # Pushes `count` duplicates; returns the jids of those actually pushed.
  def burst(klass, *args, count: 5)
    Array.new(count) { klass.perform_async(*args) }.compact
  end

  def runs(name)
    redis.lrange("runs:#{name}", 0, -1)
  end

  def done(name)
    redis.lrange("done:#{name}", 0, -1)
  end

  def open_gate(gate)
    redis.set("gate:#{gate}", "1")
  end

  def ferrolock_keys
    redis.keys("ferrolock:*")
  end

  # Every ferrolock key has an expiry of at most `within` seconds (nothing leaks); with `wait`,
  # all are gone once it passed.
  def nothing_left!(within:, wait: true)
    ttls = ferrolock_keys.to_h { |key| [key, redis.pttl(key)] }
    expect(ttls.reject { |_, ttl| ttl.between?(1, within * 1000) }).to eq({})
    wait_until(timeout: within + 2) { ferrolock_keys.empty? } if wait
  end

  # How many until_expired duplicates a burst may get in: none while the original's 5 s lock_ttl
  # surely holds (the burst ended within 4.5 s of the push), one once it surely expired (the burst
  # began 5.5 s after), and whatever it got in between.
  def until_expired_duplicates(began, ended, got)
    return 0 if ended < 4.5
    return 1 if began > 5.5

    got.size
  end

  def no_failures!(sidekiq)
    expect(Sidekiq::RetrySet.new.size).to eq(0), sidekiq.log
    expect(Sidekiq::DeadSet.new.size).to eq(0), sidekiq.log
  end

  it "lets one of a burst in while the original is queued, for every push-time lock type" do
    names = %w[UntilExecutingJob UntilExecutedJob UntilExpiredJob UntilAndWhileJob]
    accepted = names.to_h { |name| [name, burst(Object.const_get(name), 1)] }
    expect(accepted.transform_values(&:size)).to eq(names.to_h { |name| [name, 1] })
    expect(burst(WhileExecutingJob, 1).size).to eq(5) # no push-time lock
    expect(log.string.scan(/UntilExecutedJob \h+ push skipped: unique lock "unique:UntilExecutedJob:\h+" held by/).size)
      .to eq(4)
    with_sidekiq(app, concurrency: 5) do |sidekiq|
      wait_until(timeout: 40) { names.all? { |name| done(name).size == 1 } }
      accepted.each { |name, jids| expect(runs(name)).to eq(jids) }
      wait_until(timeout: 40) { Sidekiq::Queue.new.size.zero? && done("WhileExecutingJob").size.positive? }
      no_failures!(sidekiq)
    end
    nothing_left!(within: 40, wait: false) # while_executing's DistMutex fencing counter: 10 leases
  end

  it "gives the push-time lock types their promised runs for duplicates pushed while the original runs" do
    names = %w[UntilExecutingJob UntilExecutedJob UntilExpiredJob UntilAndWhileJob]
    # As many threads as originals: the duplicates stay queued while the originals run.
    with_sidekiq(app, concurrency: names.size) do |sidekiq|
      # The original's lock is taken somewhere between these two instants (a first push may take
      # a while on a loaded machine: it opens the client's connections).
      pushing_at = monotonic
      originals = names.to_h { |name| [name, Object.const_get(name).perform_async(1, "run")] }
      pushed_at = monotonic
      wait_until(timeout: 40) { names.all? { |name| runs(name).size == 1 } }
      burst_at = monotonic
      pushed = names.to_h { |name| [name, burst(Object.const_get(name), 1, "run")] }
      # until_executing: free once started, so one duplicate queues; until_executed: held;
      # until_and_while: one queues (its push lock), to run after the original; until_expired: held
      # for its lock_ttl (5 s) from the push, so one queues if a loaded machine started the
      # originals later than that (the boundary itself is not asserted). Surely held: the burst
      # ended within 4.5 s of the first instant; surely expired: it began 5.5 s after the second.
      expired_one = until_expired_duplicates(burst_at - pushed_at, monotonic - pushing_at, pushed["UntilExpiredJob"])
      expect(pushed.transform_values(&:size))
        .to eq("UntilExecutingJob" => 1, "UntilExecutedJob" => 0, "UntilExpiredJob" => expired_one,
               "UntilAndWhileJob" => 1)
      open_gate("run")
      wait_until(timeout: 40) { done("UntilAndWhileJob").size == 2 && done("UntilExecutingJob").size == 2 }
      names.each { |name| expect(runs(name)).to eq([originals[name], *pushed[name]]) }

      # Finished: all but until_expired take a new push at once.
      %w[UntilExecutingJob UntilExecutedJob UntilAndWhileJob].each do |name|
        expect(wait_until(timeout: 10) { Object.const_get(name).perform_async(2) }).to be_a(String)
      end
      # until_expired: a job that ran still refuses its duplicate until lock_ttl (5 s) passed.
      expired_at = monotonic
      expired = UntilExpiredJob.perform_async(5)
      wait_until(timeout: 40) { done("UntilExpiredJob").size == 2 + expired_one }
      duplicate = UntilExpiredJob.perform_async(5)
      expect(duplicate).to be_nil if monotonic - expired_at < 4.5 # else the lock may have expired: either is right
      later = duplicate || wait_until(timeout: 10, interval: 0.1) { UntilExpiredJob.perform_async(5) }
      expect(later).not_to eq(expired)
      expected = { "UntilExecutingJob" => 3, "UntilExecutedJob" => 2, "UntilExpiredJob" => 3 + expired_one,
                   "UntilAndWhileJob" => 3 }
      wait_until(timeout: 40) { expected.all? { |name, count| done(name).size == count } }
      no_failures!(sidekiq)
    end
    nothing_left!(within: 5)
  end

  it "runs while_executing duplicates one at a time: skipped, waiting, rescheduled or rejected" do
    names = %w[WhileExecutingJob WhileWaitingJob WhileReschedulingJob WhileRejectingJob]
    with_sidekiq(app, concurrency: 10) do |sidekiq|
      originals = names.to_h { |name| [name, Object.const_get(name).perform_async(1, "run")] }
      started = lambda do
        "every original running (runs: #{names.to_h { |name| [name, runs(name)] }}, queued: " \
          "#{Sidekiq::Queue.new.size}, retries: #{Sidekiq::RetrySet.new.map(&:item)}; sidekiq log:\n#{sidekiq.log})"
      end
      wait_until(timeout: 40, what: started) { names.all? { |name| runs(name).size == 1 } }
      skipped = burst(WhileExecutingJob, 1)
      waited = WhileWaitingJob.perform_async(1)
      rescheduled = WhileReschedulingJob.perform_async(1)
      rejected = WhileRejectingJob.perform_async(1)
      expect(skipped.size).to eq(5)
      found = lambda do
        "5 skips, a reschedule and a dead job (found: #{sidekiq.log.scan(/WhileExecutingJob \h+ run skipped/).size} " \
          "skips, dead #{Sidekiq::DeadSet.new.map(&:jid)}, runs #{names.to_h { |name| [name, runs(name)] }}; " \
          "sidekiq log:\n#{sidekiq.log})"
      end
      wait_until(timeout: 40, what: found) do
        sidekiq.log.scan(/WhileExecutingJob \h+ run skipped/).size == 5 &&
          sidekiq.log.include?("WhileReschedulingJob #{rescheduled} found a duplicate running") &&
          Sidekiq::DeadSet.new.size == 1
      end
      sleep 0.5 # the waiting duplicate would have run by now
      expect(names.to_h { |name| [name, runs(name)] }).to eq(originals.transform_values { |jid| [jid] })
      expect(Sidekiq::DeadSet.new.map(&:jid)).to eq([rejected])
      Sidekiq::DeadSet.new.clear
      open_gate("run")
      wait_until(timeout: 40) { done("WhileWaitingJob").size == 2 && done("WhileReschedulingJob").size == 2 }
      expect(runs("WhileWaitingJob")).to eq([originals["WhileWaitingJob"], waited])
      expect(runs("WhileReschedulingJob")).to eq([originals["WhileReschedulingJob"], rescheduled])
      expect(runs("WhileExecutingJob")).to eq([originals["WhileExecutingJob"]])
      expect(runs("WhileRejectingJob")).to eq([originals["WhileRejectingJob"]])
      expect(WhileExecutingJob.perform_async(1)).to be_a(String) # finished: runs again
      wait_until(timeout: 40) { runs("WhileExecutingJob").size == 2 }
      no_failures!(sidekiq)
    end
    nothing_left!(within: 40, wait: false) # DistMutex's fencing counter: 10 leases
  end

  it "frees a running until_executed job's lock one lease after kill -9, not after lock_ttl" do
    with_sidekiq(app, concurrency: 2) do |sidekiq|
      UntilExecutedJob.perform_async(3, "never")
      wait_until(timeout: 40) { runs("UntilExecutedJob").size == 1 }
      key = ferrolock_keys.find { |k| k.include?("unique:UntilExecutedJob:") }
      sleep 2.5 # past one lease (2 s): still held, renewed
      expect(UntilExecutedJob.perform_async(3, "never")).to be_nil
      expect(redis.pttl(key)).to be_between(1, 2000)
      Process.kill("KILL", -sidekiq.pid)
      killed = monotonic
      wait_until(timeout: 10) { redis.exists?(key) == false }
      expect(monotonic - killed).to be < 4 # one lease (2 s) and slack; lock_ttl is a day
      expect(UntilExecutedJob.perform_async(3, "never")).to be_a(String)
    end
  end

  it "keeps the lock of a scheduled job until it runs, and of a failed job for its retry" do
    with_sidekiq(app, concurrency: 2) do |sidekiq|
      scheduled = UntilExecutedJob.perform_in(2, 4)
      key = ferrolock_keys.first
      expect(redis.pttl(key)).to be > 86_400_000 # delay + lock_ttl
      expect(UntilExecutedJob.perform_async(4)).to be_nil
      flaky = FlakyJob.perform_async(5)
      wait_until(timeout: 10) { Sidekiq::RetrySet.new.size == 1 }
      expect(FlakyJob.perform_async(5)).to be_nil # the retry holds it
      wait_until(timeout: 40) { runs("FlakyJob").size == 2 && done("UntilExecutedJob").size == 1 }
      expect(runs("FlakyJob")).to eq([flaky, flaky])
      expect(runs("UntilExecutedJob")).to eq([scheduled])
      no_failures!(sidekiq)
      expect(wait_until(timeout: 5) { FlakyJob.perform_async(5) }).to be_a(String) # released after the retry ran
    end
  end

  it "lets a duplicate through exactly when lock_ttl passed before the original ran" do
    first = ShortTtlJob.perform_async(6)
    expect(ShortTtlJob.perform_async(6)).to be_nil
    sleep 1.2 # lock_ttl 1 s, no server yet: the queued job's lock expired
    second = ShortTtlJob.perform_async(6)
    expect(second).to be_a(String)
    with_sidekiq(app, concurrency: 2) do |sidekiq|
      wait_until(timeout: 40) { done("ShortTtlJob").size == 2 }
      expect(runs("ShortTtlJob").sort).to eq([first, second].sort)
      no_failures!(sidekiq)
    end
    nothing_left!(within: 1)
  end

  it "applies on_conflict :replace, :raise, :reject, :reschedule on push, and lock_args" do
    old = ReplaceJob.perform_in(60, 7)
    new = ReplaceJob.perform_async(7)
    expect(new).to be_a(String)
    expect(Sidekiq::ScheduledSet.new.find_job(old)).to be_nil
    expect(Sidekiq::Queue.new.find_job(new)).not_to be_nil

    RaiseJob.perform_async(8)
    expect { RaiseJob.perform_async(8) }
      .to raise_error(Ferrolock::UniqueConflict, /RaiseJob .*unique lock "unique:RaiseJob:/)

    RejectJob.perform_async(9)
    rejected = RejectJob.perform_async(9)
    expect(rejected).to be_nil
    expect(Sidekiq::DeadSet.new.map(&:klass)).to eq(["RejectJob"])

    LaterJob.perform_async(10)
    later = LaterJob.perform_async(10)
    entry = Sidekiq::ScheduledSet.new.find_job(later)
    expect(entry["ferrolock_unique_reschedules"]).to eq(1)
    expect(entry.at).to be > Time.now

    expect([LockArgsJob.perform_async(1, "a"), LockArgsJob.perform_async(1, "b"),
            LockArgsJob.perform_async(2, "a")].compact.size).to eq(2)
  end

  it "locks ActiveJob jobs on the wrapped class and its arguments" do
    with_sidekiq(app, concurrency: 3) do |sidekiq|
      3.times { UniqueActiveJob.perform_later(42) }
      UniqueActiveJob.perform_later(7)
      wait_until(timeout: 40) { runs("UniqueActiveJob").size == 2 }
      UniqueActiveJob.perform_later(42) # while running: held
      open_gate("aj")
      wait_until(timeout: 40) { done("UniqueActiveJob").size == 2 }
      sleep 0.5 # a third run would have started by now
      expect(runs("UniqueActiveJob").sort).to eq(%w[42 7])
      no_failures!(sidekiq)
    end
    nothing_left!(within: 1)
  end

  it "honours per-push options on both sides: a shorter lock_ttl, and a lock on a class without one" do
    digest_key = ->(name) { ferrolock_keys.find { |key| key.include?("unique:#{name}:") } }
    short = UntilExecutedJob.set(lock_ttl: 1).perform_async(11)
    expect(UntilExecutedJob.perform_async(11)).to be_nil
    expect(redis.pttl(digest_key.call("UntilExecutedJob"))).to be_between(1, 1000) # the push's, not a day
    sleep 1.2 # the per-push lock_ttl passed before a server ran the job
    late = UntilExecutedJob.perform_async(11)
    expect(late).to be_a(String)
    expect(redis.pttl(digest_key.call("UntilExecutedJob"))).to be > 3_600_000 # the class's day: nothing leaked

    locked = PlainJob.set(lock: :until_executed).perform_async(12, "plain")
    expect(PlainJob.set(lock: :until_executed).perform_async(12, "plain")).to be_nil
    expect(Sidekiq::Client.push("class" => "PlainJob", "args" => [12, "plain"], "lock" => "until_executed")).to be_nil
    unlocked = PlainJob.perform_async(12, "plain") # no lock asked for: pushed
    expect(unlocked).to be_a(String)
    with_sidekiq(app, concurrency: 4) do |sidekiq|
      wait_until(timeout: 40) { runs("PlainJob").size == 2 && done("UntilExecutedJob").size == 2 }
      # The server saw the push's lock: until_executed turned it into a lease (30 s, not lock_ttl's day).
      expect(redis.pttl(digest_key.call("PlainJob"))).to be_between(1, 30_000)
      expect(PlainJob.set(lock: :until_executed).perform_async(12, "plain")).to be_nil # running: held
      open_gate("plain")
      wait_until(timeout: 40) { done("PlainJob").size == 2 }
      expect(runs("PlainJob").sort).to eq([locked, unlocked].sort)
      expect(runs("UntilExecutedJob").sort).to eq([short, late].sort)
      no_failures!(sidekiq)
    end
    nothing_left!(within: 1) # the server released both locks as their jobs succeeded
  end

  # Issue 24 item 1: with FairTenant after the uniqueness client middleware, the digest held the
  # queue the job was pushed to, the server computed it from the queue it was rerouted to, and the
  # lock stayed for lock_ttl after the job succeeded.
  [[:unique_first, "UniqueClientMiddleware, then FairTenant"],
   [:fair_tenant_first, "FairTenant, then UniqueClientMiddleware"]].each do |order, chain_order|
    it "releases a rerouted job's lock and refuses its duplicates (client chain: #{chain_order})" do
      fair = Ferrolock::FairTenant::ClientMiddleware
      FerrolockTest::SidekiqVersion.client_middleware do |chain|
        if order == :unique_first
          chain.add(fair)
        else
          chain.insert_before(Ferrolock::Sidekiq::Unique::ClientMiddleware,
                              fair)
        end
      end
      first = UniqueFairJob.perform_async(1)
      rerouted = UniqueFairJob.perform_async(2) # the tenant's second push: to unique_slow
      expect(redis.llen("queue:unique_slow")).to eq(1)
      expect([UniqueFairJob.perform_async(1), UniqueFairJob.perform_async(2)]).to eq([nil, nil])
      with_sidekiq(app, concurrency: 2, queues: %w[default unique_slow]) do |sidekiq|
        wait_until(timeout: 40) { done("UniqueFairJob").size == 2 }
        expect(runs("UniqueFairJob").sort).to eq([first, rerouted].sort)
        no_failures!(sidekiq)
      end
      expect(ferrolock_keys.grep(/unique:/)).to eq([])
      expect([UniqueFairJob.perform_async(1), UniqueFairJob.perform_async(2)]).to all(be_a(String))
    ensure
      FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.remove(fair) }
    end
  end

  it "implements unique_across_queues and unique_across_workers on both sides" do
    across = [AcrossQueuesJob.perform_async(1), AcrossQueuesJob.set(queue: "other").perform_async(1),
              AcrossWorkersJob.perform_async(2), AcrossWorkersTwinJob.perform_async(2)]
    expect(across.map(&:nil?)).to eq([false, true, false, true])
    # Without the options, a queue or a class of its own makes another digest.
    expect([UntilExecutedJob.set(queue: "other").perform_async(1), UntilExecutedJob.perform_async(1)])
      .to all(be_a(String))
    with_sidekiq(app, concurrency: 3, queues: %w[default other]) do |sidekiq|
      wait_until(timeout: 40) do
        [done("AcrossQueuesJob"), done("AcrossWorkersJob"), done("UntilExecutedJob")].all?(&:any?)
      end
      wait_until(timeout: 10) { done("UntilExecutedJob").size == 2 }
      no_failures!(sidekiq)
    end
    expect(ferrolock_keys.grep(/unique:/)).to eq([])
    expect([AcrossQueuesJob.set(queue: "other").perform_async(1), AcrossWorkersTwinJob.perform_async(2)])
      .to all(be_a(String))
  end

  describe "options" do
    def job_class(options)
      Class.new do
        include Sidekiq::Worker
        sidekiq_options(options)
        def self.name = "ProbeJob"
      end
    end

    def settings(options)
      Ferrolock::Sidekiq::Unique::Settings.for(job_class(options), {})
    end

    it "names the class and the option in every error" do
      expect { settings(lock: :until_done) }
        .to raise_error(ArgumentError, /ProbeJob: sidekiq_options lock: must be one of :until_executing.*:until_done/)
      expect { settings(lock: :until_executed, lock_ttl: 0) }
        .to raise_error(ArgumentError, /ProbeJob: sidekiq_options lock_ttl must be positive/)
      expect { settings(lock: :while_executing, on_conflict: :drop) }
        .to raise_error(ArgumentError, /ProbeJob: sidekiq_options on_conflict: must be one of/)
      expect { settings(lock: :while_executing, on_conflict: { server: :replace }) }
        .to raise_error(ArgumentError, /on_conflict server: must be one of :log, :raise, :reject, :reschedule/)
      expect { settings(lock: :until_executed, lock_args_method: :nope) }
        .to raise_error(ArgumentError, /ProbeJob has no class method "nope"/)
      expect(settings(queue: "default")).to be_nil
      stub_const("BootCheckedJob", Class.new { include Sidekiq::Worker })
      BootCheckedJob.sidekiq_options(lock: :until_executed, lock_timeout: -1)
      expect { Ferrolock::Sidekiq::Unique::ServerMiddleware.validate! }
        .to raise_error(ArgumentError, /BootCheckedJob: sidekiq_options lock_timeout must be zero or more/)
      s = settings(lock: "until_executed", on_conflict: { client: :replace })
      expect([s.lock, s.ttl, s.client_conflict, s.server_conflict])
        .to eq([:until_executed, 86_400.0, :replace, :reschedule])
    end

    it "refuses the sidekiq-unique-jobs options it does not implement, naming them" do
      { lock_prefix: "uniq", lock_info: true, lock_limit: 2, unique: :until_executed, unique_args: :args,
        lock_expiration: 60, unique_on_all_queues: true }.each do |name, value|
        expect { settings(lock: :until_executed, name => value) }
          .to raise_error(ArgumentError,
                          /ProbeJob: sidekiq_options #{name}: is a sidekiq-unique-jobs option that .*remove it/)
      end
      expect { settings(unique: :until_executed) }.to raise_error(ArgumentError, /unique: .*use lock:/)
      stub_const("SujSixJob", Class.new { include Sidekiq::Worker })
      SujSixJob.sidekiq_options(unique: :until_executed) # sidekiq-unique-jobs 6's name; no lock: option
      expect { Ferrolock::Sidekiq::Unique::ServerMiddleware.validate! }
        .to raise_error(ArgumentError, /SujSixJob: sidekiq_options unique: is a sidekiq-unique-jobs option/)
      expect { settings(lock: :until_executed, unique_across_queues: "true") }
        .to raise_error(ArgumentError, /ProbeJob: sidekiq_options unique_across_queues: must be true or false/)
      s = settings(lock: :until_executed, unique_across_queues: true, unique_across_workers: false)
      expect([s.across_queues?, s.across_workers?]).to eq([true, false])
      # A payload pushed by sidekiq-unique-jobs before the switch carries such keys: it still runs.
      expect(Ferrolock::Sidekiq::Unique::Settings.for(job_class(lock: :until_executed),
                                                      { "lock_prefix" => "uniquejobs" }))
        .to be_a(Ferrolock::Sidekiq::Unique::Settings)
    end

    it "lets the job hash's options win over the class's, validated and named as per-push options" do
      klass = job_class(lock: :until_executed, lock_ttl: 600, lock_args_method: ->(args) { args.take(1) })
      klass.define_singleton_method(:by_second) { |args| [args[1]] }
      job = lambda { |**options|
        { "class" => "ProbeJob", "args" => [1, 2], "queue" => "q", **options.transform_keys(&:to_s) }
      }
      per_push = Ferrolock::Sidekiq::Unique::Settings.for(klass, job.call(lock: "until_expired", lock_ttl: 5,
                                                                          on_conflict: "raise"))
      expect([per_push.lock, per_push.ttl, per_push.client_conflict]).to eq([:until_expired, 5.0, :raise])
      # Nothing is cached: the class's own options are back for the next job.
      own = Ferrolock::Sidekiq::Unique::Settings.for(klass, job.call)
      expect([own.lock, own.ttl, own.client_conflict]).to eq([:until_executed, 600.0, :log])
      expect(Ferrolock::Sidekiq::Unique::Settings.for(klass, job.call(lock: false))).to be_nil
      # The class's Proc, in memory at push or as JSON made it on the server, stays the class's.
      proc_string = JSON.parse(JSON.generate(klass.get_sidekiq_options["lock_args_method"]))
      [klass.get_sidekiq_options["lock_args_method"], proc_string].each do |value|
        expect(Ferrolock::Sidekiq::Unique::Settings.for(klass, job.call(lock_args_method: value)).lock_args([1, 2]))
          .to eq([1])
      end
      expect(Ferrolock::Sidekiq::Unique::Settings.for(klass, job.call(lock_args_method: "by_second")).lock_args([1, 2]))
        .to eq([2])
      {
        { lock_ttl: -1 } => /ProbeJob: per-push option lock_ttl must be positive, got -1/,
        { lock: "bogus" } => /ProbeJob: per-push option lock: must be one of .*"bogus"/,
        { lock_timeout: "x" } => [TypeError, /ProbeJob: per-push option lock_timeout must be a number of seconds/],
        { on_conflict: { client: :drop } } => /ProbeJob: per-push option on_conflict client: must be one of/,
        { lock_args_method: ->(args) { args } } =>
          /per-push option lock_args_method: must be a Symbol or String naming a class method, got #<Proc/,
        { lock_args_method: "nope" } => /per-push option lock_args_method: ProbeJob has no class method "nope"/
      }.each do |options, (error, message)|
        if message.nil?
          message = error
          error = ArgumentError
        end
        expect { Ferrolock::Sidekiq::Unique::Settings.for(klass, job.call(**options)) }.to raise_error(error, message)
      end
    end

    it "raises a bad per-push option at push, before anything is queued or locked" do
      expect { UntilExecutedJob.set(lock_ttl: -1).perform_async(13) }
        .to raise_error(ArgumentError, /UntilExecutedJob: per-push option lock_ttl must be positive/)
      expect { PlainJob.set(lock: :until_done).perform_async(13) }
        .to raise_error(ArgumentError, /PlainJob: per-push option lock: must be one of/)
      expect(Sidekiq::Queue.new.size).to eq(0)
      expect(ferrolock_keys).to eq([])
      expect(UntilExecutedJob.perform_async(13)).to be_a(String)
    end
  end
end
