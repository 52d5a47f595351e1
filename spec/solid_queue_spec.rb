# frozen_string_literal: true

require "spec_helper"
require_relative "support/solid_queue_run"

# ferrolock on REAL Solid Queue 1.5.0 processes (vendored, unmodified: a supervisor forking a dispatcher
# and workers, which claim jobs from a SQLite database) in a Rails 7.2 app with ferrolock's Railtie
# (spec/fixtures/solid_queue_app), against the test redis-server. The app's enqueuing side is a console
# process (as a web process is); every count comes from the jobs' own record in Redis or from Solid
# Queue's tables, and is printed. Runs in the modern root, in its own step: bin/modern test solid_queue.
RSpec.describe "ferrolock on real Solid Queue 1.5 processes", time_limit: 120 do
  before do
    skip("bin/modern test solid_queue runs it (FERROLOCK_SOLID_QUEUE_LANE=1)") unless ENV["FERROLOCK_SOLID_QUEUE_LANE"]
    reason = FerrolockTest::SolidQueueRun.missing
    raise "solid_queue lane: #{reason}" if reason

    @run = FerrolockTest::SolidQueueRun::Run.new(FerrolockTest.redis_server, env: run_env, rails: run_rails)
  end

  after { @run&.close }

  let(:run) { @run }
  let(:run_env) { {} }
  let(:run_rails) { nil }
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:console) { run.console }

  # [[key, num, pid], ...] in the order recorded.
  def entries(list)
    redis.lrange(list, 0, -1).map { |line| line.split.then { |key, num, pid| [key, num.to_i, pid.to_i] } }
  end

  # No job ready or running in Solid Queue's tables.
  def idle?
    console.evaluate("SolidQueue::ReadyExecution.count + SolidQueue::ClaimedExecution.count").zero?
  end

  def report(title, counts)
    puts "\n  solid_queue #{title}: #{counts.map { |key, value| "#{key}=#{value}" }.join(" ")}"
  end

  it "gives limits_concurrency to Solid Queue wherever Solid Queue is loaded, whatever the include order; " \
     "ferrolock_limits_concurrency is ferrolock's", time_limit: 60 do
    own = console.evaluate("[SqOwnLimitJob.concurrency_limit, SqOwnLimitJob.ferrolock_concurrency.nil?]")
    ferrolock = console.evaluate("[SqFerrolockLimitJob.concurrency_key.nil?, " \
                                 "SqFerrolockLimitJob.ferrolock_concurrency.to_s]")
    # ferrolock's macro module extended after Solid Queue's (a class that includes ferrolock last).
    late = console.evaluate(<<~RUBY)
      klass = Class.new(ActiveJob::Base) { extend Ferrolock::ActiveJob::SolidQueueMacro::ClassMethods }
      klass.limits_concurrency(to: 3, key: "late")
      [klass.concurrency_limit, klass.ferrolock_concurrency.nil?]
    RUBY
    expect(own).to eq([2, true])
    expect(ferrolock).to eq([true, ferrolock[1]])
    expect(ferrolock[1]).to include("ConcurrencyPolicy")
    expect(late).to eq([3, true])
    # Solid Queue's macro on another adapter limits nothing: said once per class.
    lines = console.evaluate(<<~RUBY)
      out = StringIO.new
      Ferrolock.config.logger = Logger.new(out)
      class SqOtherAdapterJob < ActiveJob::Base
        self.queue_adapter = :inline
        limits_concurrency to: 1, key: "other"
        def perform = nil
      end
      2.times { SqOtherAdapterJob.perform_later }
      SqOwnLimitJob.queue_adapter_name == "solid_queue" && SqOwnLimitJob.new("x", 0).concurrency_limited? or raise "no"
      out.string.lines
    RUBY
    expect(lines.size).to eq(1)
    expect(lines.first).to include("SqOtherAdapterJob uses Solid Queue's limits_concurrency, which only Solid " \
                                   "Queue's adapter enforces; on inline its jobs are not limited")
  end

  it "holds ferrolock_limits_concurrency to: 2 over 30 jobs of one key in a worker of 5 threads, each job once; " \
     "Solid Queue's own limits_concurrency beside it holds its to: 2 in the database" do
    jobs = 30
    console.evaluate("#{jobs}.times { |n| SqFerrolockLimitJob.perform_later('a', n) }; " \
                     "#{jobs}.times { |n| SqOwnLimitJob.perform_later('b', n) }")
    blocked = {
      ferrolock: redis.llen("ferrolock:{concurrency:SqFerrolockLimitJob/a}:blocked"),
      solid_queue: console.evaluate("SolidQueue::BlockedExecution.count")
    }
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    run.supervisor(workers: 1, threads: 5)
    run.wait_for("#{jobs * 2} jobs done", timeout: 90) { redis.llen("sq:done") >= jobs * 2 }
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    done = entries("sq:done")
    ferrolock_done = done.select { |key, _, _| key == "a" }.map { |_, num, _| num }
    own_done = done.select { |key, _, _| key == "b" }.map { |_, num, _| num }
    maxima = { ferrolock: Integer(redis.get("sq:max:a")), solid_queue: Integer(redis.get("sq:max:b")) }
    report("limits_concurrency", jobs: jobs, ferrolock_max: maxima[:ferrolock], solid_queue_max: maxima[:solid_queue],
                                 ferrolock_blocked_at_enqueue: blocked[:ferrolock],
                                 solid_queue_blocked_at_enqueue: blocked[:solid_queue], seconds: took.round(1))
    expect(ferrolock_done).to match_array((0...jobs).to_a)
    expect(own_done).to match_array((0...jobs).to_a)
    expect(entries("sq:started").size).to eq(jobs * 2) # each performed once
    expect(maxima).to eq(ferrolock: 2, solid_queue: 2) # never 3 at once, and the limit was reached
    expect(blocked[:ferrolock]).to eq(jobs - 2) # parked in Redis by ferrolock, not in Solid Queue's tables
    # Solid Queue's limit is its own: ferrolock wrote nothing for SqOwnLimitJob.
    expect(redis.keys("ferrolock:{concurrency:SqOwnLimitJob*")).to eq([])
    expect(redis.keys("ferrolock:{concurrency:*}:slots")).to eq([])
  end

  # activejob-uniqueness' API (ferrolock's drop-in) on Solid Queue. Phase 1 enqueues 4 copies of each class
  # before any worker runs; phase 2 one more of each while the first runs (3 s); phase 3 one more of each
  # once all are done.
  it "holds activejob-uniqueness' five strategies in a Solid Queue worker: who is enqueued, who performs, " \
     "never two at once (until_executing aside), locks gone but until_expired's", time_limit: 90 do
    unless console.evaluate("SqApplicationJob.respond_to?(:unique)")
      skip("needs h-unique (ActiveJob uniqueness: the unique macro)")
    end
    names = %w[UntilExecuting UntilExecuted UntilExpired UntilAndWhileExecuting WhileExecuting].map do |s|
      "SqUnique#{s}Job"
    end
    enqueue = lambda do |num, hold, copies = 1|
      console.evaluate("#{names.inspect}.map { |name| #{copies}.times.count { |n| " \
                       "Object.const_get(name).perform_later('k', #{num} + n, #{hold}) } }")
    end
    phase1 = enqueue.call(0, 3, 4)
    run.supervisor(workers: 1, threads: 10)
    run.wait_for("each class's first job running", timeout: 30) do
      names.all? { |name| entries("sq:started").any? { |key, _, _| key == name } }
    end
    phase2 = enqueue.call(10, 0.2)
    first_running = entries("sq:done").none? { |_, num, _| num < 10 } # phase 2 met the first jobs running
    run.wait_for("all done", timeout: 40) { idle? }
    phase3 = enqueue.call(20, 0.2)
    run.wait_for("phase 3 done", timeout: 30) { idle? }
    starts = names.map { |name| entries("sq:started").select { |key, _, _| key == name }.map { |_, num, _| num } }
    maxima = names.map { |name| redis.get("sq:max:#{name}").to_i }
    locks = redis.keys("activejob_uniqueness:*")
    report("uniqueness", strategies: "until_executing,until_executed,until_expired,until_and_while,while",
                         enqueued_of_four: phase1.join(","), enqueued_while_running: phase2.join(","),
                         enqueued_after: phase3.join(","), performed: starts.map(&:size).join(","),
                         most_at_once: maxima.join(","), locks_left: locks.size)
    expect(first_running).to be(true)
    expect(phase1).to eq([1, 1, 1, 1, 4])
    expect(phase2).to eq([1, 0, 0, 1, 1])
    expect(phase3).to eq([1, 1, 0, 1, 1])
    starts.each { |nums| expect(nums.tally.values.uniq).to eq([1]) } # no job performed twice
    expect(starts.map(&:size).first(3)).to eq([3, 2, 1]) # every job enqueued performs: nothing drops at perform
    expect(starts[3].size).to be_between(2, 3) # phase 2's copy is dropped if it meets the first one running
    expect(starts[4].size).to be_between(2, 6) # one of phase 1's four at once, and phase 3's
    expect(maxima.drop(1)).to eq([1, 1, 1, 1])
    expect(locks.size).to eq(1)
    expect(locks.first).to start_with("activejob_uniqueness:sq_unique_until_expired_job:")
    expect(redis.ttl(locks.first)).to be_between(1, 60)
  end

  it "runs one and keeps one waiting per dual_lock key in a Solid Queue worker, skipping the rest", time_limit: 90 do
    unless console.evaluate("SqApplicationJob.respond_to?(:dual_lock)")
      skip("needs h-unique (the dual_lock macro for ActiveJob)")
    end
    console.evaluate("6.times { |n| SqDualLockJob.perform_later('k', n, 1.5) }; " \
                     "SqDualLockJob.perform_later('j', 9, 0.2)")
    run.supervisor(workers: 1, threads: 10)
    run.wait_for("the jobs done", timeout: 40) { idle? }
    started = entries("sq:started").map(&:first).tally
    report("dual_lock", enqueued: 7, performed_k: started["dualk"], performed_j: started["dualj"],
                        most_at_once_k: redis.get("sq:max:dualk"))
    expect(started).to eq("dualk" => 2, "dualj" => 1) # one ran, one waited and ran after it, four skipped
    expect(Integer(redis.get("sq:max:dualk"))).to eq(1)
  end

  context "when a worker is killed (kill -9) while its job holds a slot" do
    # The replacement boots (5 s) slower than a promoted job's lease (1.5 s): the console's timer promotes
    # the first blocked job again and again while its copies wait in Solid Queue (ci8 ran one twice).
    let(:run_env) { { "SQ_KILL_DURATION" => "1.5", "SQ_REPLACEMENT_BOOT" => "5" } }

    it "frees the slot within its lease, runs the blocked jobs once each (a job promoted again too), and " \
       "Solid Queue fails the killed job (ProcessExitError) until it is retried" do
      supervisor = run.supervisor(workers: 1, threads: 3)
      console.evaluate("SqKillJob.perform_later(0, 60)")
      run.wait_for("job 0 running", timeout: 20) { redis.llen("sq:started") == 1 }
      victim = entries("sq:started").first[2]
      first_blocked = console.evaluate("3.times.map { |num| SqKillJob.perform_later(num + 1, 0.1).job_id }").first
      blocked = redis.llen("ferrolock:{concurrency:SqKillJob/kill}:blocked")
      Process.kill("KILL", victim)
      killed_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      redis.del("sq:now:kill") # the killed job never counted itself out
      run.wait_for("the blocked jobs done", timeout: 40) { redis.llen("sq:done") >= 3 }
      freed_after = Process.clock_gettime(Process::CLOCK_MONOTONIC) - killed_at
      run.wait_for("the killed job failed by the supervisor", timeout: 20) do
        console.evaluate("SolidQueue::FailedExecution.count") == 1
      end
      failure = console.evaluate("SolidQueue::FailedExecution.last.exception_class")
      # Solid Queue keeps the killed worker's row until it prunes it; the supervisor forked a new worker.
      replacement = run.workers(supervisor) - [victim]
      # Solid Queue runs the killed job again only when it is retried; it then takes a slot like any job.
      console.evaluate("SolidQueue::FailedExecution.last.retry")
      run.wait_for("the retried job done", timeout: 30) { redis.llen("sq:done") >= 4 }
      done = entries("sq:done").map { |_, num, _| num }
      starts = entries("sq:started").map { |_, num, _| num }.tally
      # Each promotion of job 1 enqueued a copy of it (a row of Solid Queue's jobs).
      copies = console.evaluate("SolidQueue::Job.where(active_job_id: #{first_blocked.inspect}).count")
      report("kill -9", blocked_at_kill: blocked, seconds_until_blocked_done: freed_after.round(1),
                        killed_job_failure: failure, runs_per_job: starts.inspect.delete(" "),
                        replacement_workers: replacement.size, promoted_copies: copies)
      expect(blocked).to eq(3)
      expect(copies).to be >= 2
      expect(done).to eq([1, 2, 3, 0])
      expect(starts).to eq(0 => 2, 1 => 1, 2 => 1, 3 => 1) # the killed run, and its retry
      expect(Integer(redis.get("sq:max:kill"))).to eq(1)
      expect(failure).to eq("SolidQueue::Processes::ProcessExitError")
      expect(replacement.size).to eq(1)
      expect(entries("sq:done").map(&:last).uniq).to eq(replacement) # the blocked jobs and the retry ran there
      # The lease (1.5 s), the replacement's boot (5 s) and the console's timer (0.2 s), with room for a busy
      # machine; not a sweep period.
      expect(freed_after).to be < 18
    end
  end

  # The Railtie starts limits_concurrency's timer in every Solid Queue worker as it starts
  # (SolidQueue.on_worker_start): a worker that has admitted no job yet promotes a parked job whose
  # holder's lease ran out. Nothing else could: the holder (job 0) is gone from Solid Queue's tables, so
  # no release comes, and the console's timer (started by its enqueues) is stopped before the supervisor
  # starts.
  context "when a job is parked before any worker started and its holder never runs" do
    let(:run_env) { { "SQ_RECORD_PROMOTIONS" => "1", "SQ_KILL_DURATION" => "6" } }

    it "is promoted by the timer a worker started at its start, and runs once", time_limit: 90 do
      enqueued = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      job_id = console.evaluate(<<~RUBY)
        holder = SqKillJob.perform_later(0, 0) # takes the slot: a lease of 6 s
        SolidQueue::Job.where(active_job_id: holder.job_id).each { |job| job.ready_execution&.destroy!; job.destroy! }
        parked = SqKillJob.perform_later(1, 0)
        Ferrolock::ActiveJob::Slots.for(Ferrolock.client).timer.stop
        parked.job_id
      RUBY
      expect(console.evaluate("Ferrolock::ActiveJob::Slots.for(Ferrolock.client).timer.running?")).to be(false)
      expect(console.evaluate("SolidQueue::Job.count")).to eq(0) # job 1 parked in Redis, job 0 gone
      expect(redis.lrange("ferrolock:{concurrency:SqKillJob/kill}:blocked", 0, -1)).to eq([job_id])
      supervisor = run.supervisor(workers: 1, threads: 3)
      registered = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      run.wait_for("job 1 done", timeout: 30) { redis.llen("sq:done") >= 1 }
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - registered
      workers = run.workers(supervisor)
      promotions = redis.lrange("sq:promoted", 0, -1).map(&:split)
      copies = console.evaluate("SolidQueue::Job.where(active_job_id: #{job_id.dump}).count")
      # Whether the holder's lease ran out once the worker was up (else the timer's first visit found it due).
      report("timer from worker start", lease_ran_out_after_start: registered - enqueued < 6,
                                        seconds_from_registered_to_done: took.round(1), promotions: promotions.size,
                                        promoted_in_worker: promotions.map { |_, pid, _| pid.to_i } == workers,
                                        copies: copies)
      expect(workers.size).to eq(1)
      expect(promotions).to eq([[job_id, workers.first.to_s, "ferrolock-concurrency-timer"]]) # once, by its timer
      expect(entries("sq:started").map { |_, num, pid| [num, pid] }).to eq([[1, workers.first]]) # once, there
      expect(entries("sq:done").map { |_, num, _| num }).to eq([1])
      expect(copies).to eq(1)
      # The slot given back: only the fencing counter is left, and it expires.
      key = "ferrolock:{concurrency:SqKillJob/kill}"
      run.wait_for("the slot given back", timeout: 10) { redis.keys("#{key}*") == ["#{key}:fence"] }
      expect(redis.keys("ferrolock:*").map { |name| redis.pttl(name) }).to all(be_positive)
    end
  end

  # A job promoted twice on real Solid Queue processes (spec/rails_app_spec.rb has it on two Sidekiq processes).
  # SqTwiceJob runs one at a time per key with a lease of 4 s; its queue is paused (Solid Queue's own pause).
  # Job 0 takes the slot on a queue that stays paused, so it never runs: its lease runs out and a timer
  # promotes job 1, whose copy waits in the paused queue until its own lease runs out and it is promoted
  # again. Then two worker processes of one thread each take the copies.
  context "when a job is promoted twice (its first copy had not started within its lease)" do
    let(:run_env) { { "SQ_RECORD_PROMOTIONS" => "1", "SQ_RECORD_EVENTS" => "1" } }

    def slots_key(key) = "ferrolock:{concurrency:SqTwiceJob/#{key}}"

    # Enqueues job 0, job 1 (with `gate`: Ruby code of a third argument) and `later` (jobs 2…) of `key` with the
    # queues paused, starts the workers and waits for job 1's second promotion; returns the jobs' job_ids.
    def promote_twice(key, gate: nil, later: 0)
      ids = console.evaluate(<<~RUBY)
        %w[sq_hold sq_twice].each { |name| SolidQueue::Queue.find_by_name(name).pause }
        SqTwiceJob.set(queue: "sq_hold").perform_later(#{key.dump}, 0)
        [SqTwiceJob.perform_later(#{key.dump}, 1#{", #{gate}" if gate}).job_id] +
          #{later}.times.map { |n| SqTwiceJob.perform_later(#{key.dump}, n + 2).job_id }
      RUBY
      run.supervisor(workers: 2, threads: 1)
      run.wait_for("job 1 promoted twice", timeout: 40) { promotions(ids.first) >= 2 }
      ids
    end

    def promotions(job_id) = redis.lrange("sq:promoted", 0, -1).count { |line| line.start_with?("#{job_id} ") }

    # [detail, pid] of each `name` event of job_id (app.rb's SQ_RECORD_EVENTS).
    def events(name, job_id)
      lines = redis.lrange("sq:events", 0, -1).map(&:split)
      lines.select { |event, id, *| event == name && id == job_id }.map { |_, _, detail, pid| [detail, pid.to_i] }
    end

    # Job 1's copies: rows of Solid Queue's jobs, one per promotion.
    def copies(job_id) = console.evaluate("SolidQueue::Job.where(active_job_id: #{job_id.dump}).count")

    def resume = console.evaluate("SolidQueue::Queue.find_by_name('sq_twice').resume")

    it "runs it once when an operator force-releases it before any copy started: the first copy to perform " \
       "claims it, the other is a duplicate; never two at once", time_limit: 90 do
      job_id = promote_twice("f").first
      released = console.evaluate("Ferrolock::Admin.new.force_release_job('SqTwiceJob/f', #{job_id.dump})")
      copies = copies(job_id) # no promotion after the release: its entry is gone
      resume
      run.wait_for("one copy performed, the others duplicates", timeout: 40) do
        entries("sq:done").size + events("discarded", job_id).size >= copies
      end
      started = entries("sq:started")
      duplicates = events("discarded", job_id)
      report("promoted twice, force-released", copies: copies, promotions: promotions(job_id),
                                               slot_given_back: released, performed: started.size,
                                               duplicates: duplicates.size,
                                               processes: (started.map(&:last) + duplicates.map(&:last)).uniq.size,
                                               most_at_once: redis.get("sq:max:f"))
      expect(copies).to be >= 2 # more only if a stall let a lease run out a third time
      expect(promotions(job_id)).to eq(copies)
      expect(started.map { |key, num, _| [key, num] }).to eq([["f", 1]]) # one perform
      expect(entries("sq:done").map { |key, num, _| [key, num] }).to eq([["f", 1]])
      expect(duplicates.map(&:first)).to eq(["duplicate"] * (copies - 1))
      expect(Integer(redis.get("sq:max:f"))).to eq(1)
      run.wait_for("the slot given back", timeout: 10) { !redis.exists?("#{slots_key("f")}:slots") }
      # What is left expires: the fence and the record of the copy that claimed the job.
      expect(redis.keys("#{slots_key("f")}*").sort).to eq(["#{slots_key("f")}:fence",
                                                           "#{slots_key("f")}:started:#{job_id}"])
      expect(redis.keys("ferrolock:*").map { |name| redis.pttl(name) }).to all(be_positive)
    end

    it "keeps the running copy's slot when another copy fails before it performs (its argument cannot be " \
       "deserialized): job 2 waits for the running copy's end, never two at once", time_limit: 90 do
      job_id, next_id = promote_twice("g", gate: 'SqCopyGate.new("g")', later: 1)
      resume
      run.wait_for("a copy failed before it performed", timeout: 40) do
        events("failed_before_perform", job_id).any?
      end
      # The running copy (it holds on until "go") still holds the slot, and job 2 is still parked.
      at_failure = { slots: redis.zrange("#{slots_key("g")}:slots", 0, -1),
                     blocked: redis.lrange("#{slots_key("g")}:blocked", 0, -1), running: redis.get("sq:now:g") }
      redis.rpush("sq:gate:g:go", "1")
      run.wait_for("job 2 done", timeout: 40) { entries("sq:done").size >= 2 }
      copies = copies(job_id)
      run.wait_for("every other copy failed", timeout: 30) do
        console.evaluate("SolidQueue::FailedExecution.count") >= copies - 1
      end
      failures = console.evaluate("SolidQueue::FailedExecution.all.map { |row| [row.job.active_job_id, " \
                                  "row.exception_class] }")
      failed = events("failed_before_perform", job_id)
      given = failed.map { |detail, _| detail.delete_prefix("gave_back=") }.uniq.join(",")
      report("promoted twice, a copy failed before perform",
             copies: copies, promotions: promotions(job_id), failed_before_perform: failed.size, gave_back: given,
             at_failure: at_failure.inspect.delete(" "), most_at_once: redis.get("sq:max:g"))
      expect(copies).to be >= 2
      expect(promotions(job_id)).to eq(copies)
      expect(at_failure).to eq(slots: [job_id], blocked: [next_id], running: "1")
      expect(failed.map(&:first)).to eq(["gave_back=false"] * (copies - 1)) # each gave nothing back
      expect(failures).to eq([[job_id, "ActiveJob::DeserializationError"]] * (copies - 1))
      expect(events("discarded", job_id)).to eq([])
      expect(entries("sq:started").map { |key, num, _| [key, num] }).to eq([["g", 1], ["g", 2]]) # job 2 after
      expect(entries("sq:done").map { |key, num, _| [key, num] }).to eq([["g", 1], ["g", 2]])
      expect(Integer(redis.get("sq:max:g"))).to eq(1)
    end
  end

  # Solid Queue needs ActiveRecord, which the vendored Rails 8.1 lacks: its ActiveJob, ActiveSupport and
  # railties run here under Debian testing's ActiveRecord 7.2 (spec/fixtures/solid_queue_app/app.rb).
  context "with Rails 8.1 job continuations (ActiveJob::Continuable)" do
    let(:run_rails) { "8.1" }

    it "resumes a job its stopping worker interrupted in the next supervisor's worker, each item once, " \
       "keeping its ferrolock_limits_concurrency slot: the next job of the key waits for its end" do
      expect(console.evaluate("[ActiveJob.version.to_s, ActiveRecord.version.to_s]")).to eq(["8.1.3.1", "7.2.4"])
      console.evaluate("SqContinuationJob.perform_later(0, 40); SqContinuationJob.perform_later(1, 3)")
      first = run.supervisor(workers: 1, threads: 3)
      run.wait_for("job 0 past item 5", timeout: 30) { redis.llen("sq:items") >= 5 }
      Process.kill("TERM", -first) # Solid Queue's graceful stop: the worker is stopping, the job checkpoints
      run.wait_for("the first supervisor stopped", timeout: 30) { Process.waitpid(first, Process::WNOHANG) }
      at_stop = redis.lrange("sq:items", 0, -1)
      run.supervisor(workers: 1, threads: 3)
      run.wait_for("both jobs done", timeout: 60) { redis.llen("sq:done") >= 2 }
      items = redis.lrange("sq:items", 0, -1).map { |line| line.split.map(&:to_i) }
      first_job = items.select { |num, _, _| num.zero? }
      report("continuation", items_at_stop: at_stop.size, resumptions: first_job.map(&:last).max,
                             runs: entries("sq:started").map { |_, num, _| num }.tally.inspect.delete(" "))
      expect(first_job.map { |_, item, _| item }).to eq((0...40).to_a) # each item once, in order
      expect(first_job.last.last).to eq(1) # resumed once
      expect(at_stop.size).to be < 40 # interrupted, not run to its end by the stopping worker
      expect(entries("sq:started").map { |_, num, _| num }).to eq([0, 0, 1]) # job 1 after job 0's end
      expect(entries("sq:done").map { |_, num, _| num }).to eq([0, 1])
      expect(Integer(redis.get("sq:max:cont"))).to eq(1)
      expect(items.select { |num, _, _| num == 1 }.map { |_, item, _| item }).to eq([0, 1, 2])
    end
  end
end
