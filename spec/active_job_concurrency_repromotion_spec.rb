# frozen_string_literal: true

require "logger"
require_relative "support/active_job_jobs"

# A promoted limits_concurrency job holds its slot for `duration` until it starts. A copy that waits in
# its queue longer than that (a slow-booting worker) is promoted again by the expiry timer: two copies of
# the job are queued. Each promotion is numbered and its copy carries the number; at perform only the copy
# that started first runs, again if it is replayed (a queue's redelivery, Solid Queue's
# FailedExecution#retry, a retry_on retry); another promotion's copy is skipped (:discarded, reason:
# :duplicate). Against the test Redis, on ActiveJob's :test adapter, its queue run here as a worker would.
RSpec.describe "ActiveJob limits_concurrency: a job promoted again runs once", time_limit: 30 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:log) { StringIO.new }
  let(:events) { [] }
  let!(:subscription) do
    Ferrolock.subscribe(:promoted, :discarded) do |event, payload|
      events << [event, payload[:job_id], payload[:reason]]
    end
  end

  # No timer of this process outlives the examples (the suite's Redis goes after them).
  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  after { Ferrolock.unsubscribe(subscription) }

  around { |example| with_loggers(ferrolock: Logger.new(log)) { example.run } }

  include FerrolockTest::ActiveJobJobs

  # Job 0 holds the key's one slot and runs: its release promotes job 1, whose copy is left in the queue
  # until its lease (`duration`) ran out and the timer promoted it again. The queued copies of job 1
  # (two, or more if a lease ran out again meanwhile on a busy machine), oldest first. `args`: job n's
  # arguments.
  def promoted_again(klass, args: ->(num) { ["a", num] })
    klass.perform_later(*args.call(0))
    second = klass.perform_later(*args.call(1))
    run_queued(klass)
    expect(queue(klass).map { |job| job["job_id"] }).to eq([second.job_id])
    wait_until(timeout: 10, what: -> { "job 1 promoted again: #{queue(klass).size} copies queued" }) do
      queue(klass).size >= 2
    end
    LC_RAN.clear
    copies = take_queued(klass)
    expect(copies.map { |copy| copy["job_id"] }.uniq).to eq([second.job_id])
    copies
  end

  # Every job queued, taken out of the queue, oldest first (as a worker receives them).
  def take_queued(klass) = queue(klass).shift(queue(klass).size).map { |job| job.transform_keys(&:to_s) }

  def perform(copy) = ::ActiveJob::Base.execute(copy)

  # A job class whose job 1 raises IOError at its first attempt (LC_ATTEMPTS: job 1's attempts); `body`
  # adds to the class.
  def failing_once(name, &body)
    stub_const("LC_ATTEMPTS", Queue.new)
    job_class(name, to: 1, key: ->(account, _n) { account }, duration: 0.3) do
      class_eval(&body) if body

      define_method(:perform) do |account, num|
        LC_ATTEMPTS << num if num == 1
        raise IOError, "first attempt fails" if num == 1 && LC_ATTEMPTS.size == 1

        LC_RAN << [account, num, ferrolock_fence]
      end
    end
  end

  def duplicates(job_id) = events.select { |event| event == [:discarded, job_id, :duplicate] }

  it "runs one copy of the two the timer enqueued, the older first: the newer is skipped as a duplicate" do
    klass = recording("LcTwiceOlderFirstJob", to: 1, key: ->(account, _n) { account }, duration: 0.3)
    copies = promoted_again(klass)
    copies.each { |copy| perform(copy) }
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 1]])
    job_id = copies.first["job_id"]
    expect(events.count { |event, id, _| event == :promoted && id == job_id }).to eq(copies.size)
    expect(copies.map { |copy| copy[Ferrolock::ActiveJob::Promotion::FIELD] }).to eq((1..copies.size).to_a)
    expect(duplicates(job_id).size).to eq(copies.size - 1)
    expect(log.string.scan("#{job_id}: not performed: another copy of this job started already").size)
      .to eq(copies.size - 1)
    # Nothing held or parked is left; the record of the copy that started expires like the blocked jobs.
    key = "ferrolock:{concurrency:LcTwiceOlderFirstJob/a}"
    wait_until(timeout: 3, what: -> { "only the fence and the record: #{redis.keys("#{key}*").sort}" }) do
      redis.keys("#{key}*").sort == ["#{key}:fence", "#{key}:started:#{job_id}"]
    end
    expect(redis.pttl("#{key}:started:#{job_id}")).to be_between(1, 7 * 24 * 3600 * 1000)
  end

  it "runs one copy when the newer copy performs first" do
    klass = recording("LcTwiceNewerFirstJob", to: 1, key: ->(account, _n) { account }, duration: 0.3)
    copies = promoted_again(klass)
    copies.reverse_each { |copy| perform(copy) }
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 1]])
    expect(duplicates(copies.first["job_id"]).size).to eq(copies.size - 1)
  end

  it "runs one copy when two workers perform both copies at once" do
    stub_const("LC_STARTED", Queue.new)
    klass = job_class("LcTwiceAtOnceJob", to: 1, key: ->(account, _n) { account }, duration: 0.3) do
      def perform(account, num)
        LC_STARTED << num
        sleep 0.3 # still running when the other copy performs
        LC_RAN << [account, num, ferrolock_fence]
      end
    end
    copies = promoted_again(klass)
    LC_STARTED.clear
    copies.map { |copy| Thread.new { perform(copy) } }.each(&:join)
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 1]])
    expect(LC_STARTED.size).to eq(1)
  end

  it "reads a promotion an older version left (entry \"<lease ms>|<payload>\", a copy with no number): one run" do
    klass = recording("LcTwiceUpgradeJob", to: 1, key: ->(account, _n) { account }, duration: 1)
    jobs = "ferrolock:{concurrency:LcTwiceUpgradeJob/a}:jobs"
    klass.perform_later("a", 0)
    second = klass.perform_later("a", 1)
    # Blocked and never promoted: the older format still.
    expect(redis.hget(jobs, second.job_id)).to match(/\A1000\|\{/)
    # The holder's release promotes it; as the older version would have left it, the entry keeps no
    # number and the queued copy carries none.
    run_queued(klass)
    old_copy = queue(klass).shift.transform_keys(&:to_s).except(Ferrolock::ActiveJob::Promotion::FIELD)
    entry = redis.hget(jobs, second.job_id)
    expect(entry).to match(/\A1000:1\|\{/)
    redis.hset(jobs, second.job_id, entry.sub("1000:1|", "1000|"))
    wait_until(timeout: 10, what: "the job promoted again") { queue(klass).any? }
    LC_RAN.clear
    new_copies = take_queued(klass)
    expect(new_copies.first[Ferrolock::ActiveJob::Promotion::FIELD]).to eq(1)
    [old_copy, *new_copies].each { |copy| perform(copy) }
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 1]])
  end

  it "runs the same copy again when it is replayed after it raised (a redelivery, FailedExecution#retry)" do
    klass = failing_once("LcTwiceReplayJob")
    copies = promoted_again(klass)
    newest = copies.last
    expect { perform(newest) }.to raise_error(IOError, "first attempt fails")
    perform(newest) # the same payload again
    copies[0...-1].each { |copy| perform(copy) }
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 1]])
    expect(LC_ATTEMPTS.size).to eq(2) # the failed attempt and the replay: no other copy started
    expect(duplicates(newest["job_id"]).size).to eq(copies.size - 1)
  end

  it "runs a retry_on retry of the copy that started, and skips the other copy" do
    klass = failing_once("LcTwiceRetryOnJob") { retry_on IOError, wait: 0, attempts: 3 }
    copies = promoted_again(klass)
    perform(copies.first) # raises; retry_on enqueues the retry
    expect(queue(klass).size).to eq(1)
    copies.drop(1).each { |copy| perform(copy) }
    work_off(klass) # the retry
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 1]])
    expect(LC_ATTEMPTS.size).to eq(2)
    expect(duplicates(copies.first["job_id"]).size).to eq(copies.size - 1)
  end

  it "keeps the running copy's slot when another copy fails before it performs (its class is gone there)" do
    stub_const("LC_STARTED", Queue.new)
    stub_const("LC_GO", Queue.new)
    klass = job_class("LcTwiceBrokenCopyJob", to: 1, key: ->(account, _n) { account }, duration: 0.3) do
      def perform(account, num)
        LC_STARTED << num
        LC_GO.pop if num == 1
        LC_RAN << [account, num, ferrolock_fence]
      end
    end
    copies = promoted_again(klass)
    LC_STARTED.clear # (job 0 ran)
    running = Thread.new { perform(copies.first) }
    wait_until(timeout: 5, what: "copy 1 running") { LC_STARTED.size == 1 }
    # A worker that lacks the class (a rolling deploy) fails the other copy before it performs.
    broken = copies.last.merge("job_class" => "LcNoSuchJobClass")
    expect { perform(broken) }.to raise_error(NameError)
    job_id = copies.first["job_id"]
    expect(log.string).to include("#{job_id} failed before it performed").and include("another copy of it runs in it")
    # The key's one slot is still the running copy's: a new job is blocked, not enqueued.
    third = klass.perform_later("a", 2)
    expect(queue(klass).map { |job| job["job_id"] }).not_to include(third.job_id)
    expect(redis.zscore("ferrolock:{concurrency:LcTwiceBrokenCopyJob/a}:slots", job_id)).not_to be_nil
    LC_GO << true
    running.join
    # Its release promotes the blocked job, which runs.
    expect(queue(klass).map { |job| job["job_id"] }).to eq([third.job_id])
    run_queued(klass)
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 1], ["a", 2]])
  end

  it "runs one of the queued copies when the job is force-released before any copy started" do
    klass = recording("LcTwiceForcedJob", to: 1, key: ->(account, _n) { account }, duration: 0.3)
    copies = promoted_again(klass)
    job_id = copies.first["job_id"]
    Ferrolock::Admin.new.force_release_job("LcTwiceForcedJob/a", job_id)
    copies.reverse_each { |copy| perform(copy) }
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 1]])
    expect(duplicates(job_id).size).to eq(copies.size - 1)
  end

  # On :async a promoted job waits in the adapter's thread pool behind whatever runs there: with the
  # pool busy past the job's duration, the timer promotes it again and both copies reach the pool.
  it "runs one copy on the :async adapter when its one thread was busy past the duration" do
    stub_const("LC_PROMOTIONS", Queue.new)
    stub_const("LC_GO", Queue.new)
    promotions = Ferrolock.subscribe(:promoted) do |_event, payload|
      LC_PROMOTIONS << payload[:job_id] if payload[:job_class] == "LcTwiceAsyncJob"
    end
    adapter = ActiveJob::QueueAdapters::AsyncAdapter.new(min_threads: 1, max_threads: 1)
    # Queued behind job 0 in the pool, so job 1's first promotion waits behind it: it runs until job 1
    # was promoted twice (Redis' clock decides when the lease ran out, not a sleep here).
    hog = job_class("LcAsyncHogJob", adapter: adapter) do
      include FerrolockTest::Timing

      def perform = wait_until(timeout: 10, what: "job 1 promoted twice") { LC_PROMOTIONS.size >= 2 }
    end
    klass = job_class("LcTwiceAsyncJob", adapter: adapter, to: 1, key: ->(account, _n) { account }, duration: 0.3) do
      include FerrolockTest::Timing

      define_method(:perform) do |account, num|
        if num.zero?
          hog.perform_later
          # Job 1 is blocked behind this one before it ends (else it could take the free slot).
          wait_until(timeout: 10, what: "job 1 blocked") { !LC_GO.empty? }
        end
        LC_RAN << [account, num, ferrolock_fence]
      end
    end
    klass.perform_later("a", 0)
    second = klass.perform_later("a", 1)
    expect(redis.lrange("ferrolock:{concurrency:LcTwiceAsyncJob/a}:blocked", 0, -1)).to eq([second.job_id])
    LC_GO << true
    wait_until(timeout: 20, what: -> { "job 1 run and its other copies discarded: #{events}" }) do
      LC_RAN.size == 2 && duplicates(second.job_id).size == LC_PROMOTIONS.size - 1
    end
    expect(LC_PROMOTIONS.size).to be >= 2
    expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 0], ["a", 1]])
    expect(events.count { |event, id, _| event == :promoted && id == second.job_id }).to eq(LC_PROMOTIONS.size)
    key = "ferrolock:{concurrency:LcTwiceAsyncJob/a}"
    wait_until(timeout: 3, what: -> { "only the fence and the record: #{redis.keys("#{key}*").sort}" }) do
      redis.keys("#{key}*").sort == ["#{key}:fence", "#{key}:started:#{second.job_id}"]
    end
  ensure
    Ferrolock.unsubscribe(promotions) if promotions
  end

  it "resumes the copy that started after a Rails 8.1 continuation's interruption, and skips the other copy" do
    skip "ActiveJob #{::ActiveJob.version} has no continuations (FERROLOCK_RAILS=8.1 runs this)" unless
      defined?(::ActiveJob::Continuable)
    stopping = [false] # job 0 runs whole
    klass = continuable("LcTwiceContinuableJob", stopping, to: 1, key: ->(_num) { "k" }, duration: 0.3)
    copies = promoted_again(klass, args: ->(num) { [num] })
    job_id = copies.first["job_id"]
    stopping[0] = true
    perform(copies.first) # item 0, then interrupted at its checkpoint: it enqueues its resumption
    queued = take_queued(klass)
    expect(queued.map { |job| job["job_id"] }.uniq).to eq([job_id])
    # The resumption carries the copy's promotion (a copy promoted meanwhile, on a busy machine, another).
    field = Ferrolock::ActiveJob::Promotion::FIELD
    resumption, later = queued.partition { |job| job[field] == copies.first[field] }
    expect(resumption.size).to eq(1)
    stopping[0] = false
    (copies.drop(1) + later).each { |copy| perform(copy) } # while the resumption waits: duplicates
    perform(resumption.first) # goes on from its cursor
    expect(queue(klass)).to be_empty
    expect(ran.map { |num, item, _| [num, item] }).to eq([[1, 0], [1, 1], [1, 2]])
    expect(duplicates(job_id).size).to eq(copies.size - 1 + later.size)
  end
end
