# frozen_string_literal: true

require "spec_helper"
require_relative "support/shoryuken_sqs"

# Ferrolock::Shoryuken::LockMiddleware in REAL Shoryuken 7.0.3 processes (vendored, unmodified: its CLI,
# launcher, fetcher, processor and default server chain, with the middleware inserted before AutoDelete
# by the README's own set-up) consuming REAL queues of a real SQS-compatible server (moto, started on
# a free loopback port for each example). Nothing about SQS is faked: the duplicates are SQS's own
# redeliveries after a visibility timeout, a producer's second message, a delete that never reached
# SQS. Every count comes from the workers' own record in Redis (spec/support/shoryuken_sqs_app.rb),
# and is printed. Runs in the modern root (Ruby >= 3.2), in its own lane: bin/modern test shoryuken_sqs.
# The limits_concurrency example runs on real Shoryuken 6.2.1 processes too (its own ActiveJob adapter).
RSpec.describe "Ferrolock::Shoryuken::LockMiddleware in real Shoryuken 7.0.3 against a real SQS server (moto)" do
  # (1)'s size: 500 messages of 1.5 s on 20 threads take about 40 s of work.
  messages = Integer(ENV.fetch("FERROLOCK_SQS_MESSAGES", "500"))

  before do
    # Only the lane runs it (about 2 minutes); there, what it needs must be there.
    skip("bin/modern test shoryuken_sqs runs it (FERROLOCK_SQS_LANE=1)") unless ENV["FERROLOCK_SQS_LANE"]
    reason = FerrolockTest::ShoryukenSqs.missing
    raise "shoryuken_sqs lane: #{reason}" if reason

    @run = FerrolockTest::ShoryukenSqs::Run.new(FerrolockTest.redis_server)
  end

  after { @run&.close }

  let(:run) { @run }

  def uniq_name(prefix)
    "#{prefix}-#{SecureRandom.hex(4)}"
  end

  # Prints a scenario's counts (the lane's log shows them).
  def report(title, counts)
    puts "\n  shoryuken_sqs #{title}: #{counts.map { |key, value| "#{key}=#{value}" }.join(" ")}"
  end

  def runs_per_id(list)
    list.tally.values.tally
  end

  it "runs each of #{messages} messages once while SQS redelivers the running ones (2 processes x 10 threads)",
     time_limit: 180 do
    queue = uniq_name("flood")
    url = run.queue(queue, VisibilityTimeout: 1)
    ids = (1..messages).map { |i| "m#{i}" }
    run.send_bodies(url, ids.map { |id| { id: id, sleep: 1.5 } })
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    2.times { run.shoryuken({ queue => { "lock" => true } }) }
    run.wait_for("#{messages} runs done", timeout: 150) { run.redis.llen("rec:done") >= messages }
    run.wait_for("every copy deleted", timeout: 30) { run.depth(url) == [0, 0] }
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    sleep 1.5 # a copy still on its way would come back after the 1 s visibility timeout
    record = run.record
    depth = run.depth(url)
    events = record[:events]
    report("(1) redeliveries", messages: messages, starts: record[:starts].size, done: record[:done].size,
                               overlaps: record[:overlaps].size,
                               copies_skipped_in_progress: events["skipped_in_progress"].to_i,
                               copies_deleted_as_processed: events["skipped_processed"].to_i,
                               left_visible: depth[0], left_in_flight: depth[1], seconds: took.round(1))
    expect(record[:done].sort).to eq(ids.sort)
    expect(record[:starts].size).to eq(messages)
    expect(record[:overlaps]).to eq([])
    expect(depth).to eq([0, 0])
    expect(events["skipped_in_progress"].to_i + events["skipped_processed"].to_i).to be > 0
  end

  it "runs a job sent twice by a producer retry once, keyed by an idempotency key (standard and FIFO queues)",
     time_limit: 120 do
    jobs = 20
    variants = {
      # No key: the two messages have two message ids, so both run (what the key is for).
      "no key (message id), standard" => [{ "lock" => true }, {}, ->(_, _) { {} }],
      "attribute key, standard" => [{ "lock" => { "idempotency_key" => "JobKey" } }, {},
                                    ->(body, _) { { message_attributes: attribute(body) } }],
      "proc key, standard" => [{ "lock" => { "idempotency_key" => "proc" } }, {}, ->(_, _) { {} }],
      # Content-based dedup drops a retry with the same body; this retry's body differs (its attempt).
      "proc key, FIFO content-based dedup" => [{ "lock" => { "idempotency_key" => "proc" } },
                                               { FifoQueue: true, ContentBasedDeduplication: true },
                                               ->(body, _) { { message_group_id: body[:job_key] } }],
      # Without content-based dedup each send names its dedup id: a retry that makes a new one.
      "attribute key, FIFO explicit dedup ids" => [
        { "lock" => { "idempotency_key" => "JobKey" } }, { FifoQueue: true },
        lambda do |body, attempt|
          { message_group_id: body[:job_key], message_attributes: attribute(body),
            message_deduplication_id: "#{body[:job_key]}-#{attempt}" }
        end
      ]
    }
    queues = variants.to_h do |name, (worker, attributes, extra)|
      fifo = attributes[:FifoQueue]
      queue = "#{uniq_name("retry")}#{".fifo" if fifo}"
      url = run.queue(queue, VisibilityTimeout: 5, **attributes)
      [name, [queue, url, worker, extra]]
    end
    queues.each_value do |queue, url, _, extra|
      [1, 2].each do |attempt| # the producer's first send, then its retry
        bodies = (1..jobs).map do |i|
          { id: "#{queue}-job#{i}", job_key: "#{queue}-job#{i}", attempt: attempt, sleep: 0.2 }
        end
        bodies.each_slice(10) do |slice|
          entries = slice.each_with_index.map do |body, i|
            { id: i.to_s, message_body: JSON.generate(body) }.merge(extra.call(body, attempt))
          end
          failed = run.sqs.send_message_batch(queue_url: url, entries: entries).failed
          raise "send_message_batch: #{failed.map(&:message)}" unless failed.empty?
        end
      end
    end
    run.shoryuken(queues.values.to_h { |queue, _, worker, _| [queue, worker] })
    run.wait_for("every copy deleted", timeout: 90) do
      queues.each_value.all? { |_, url, _, _| run.depth(url) == [0, 0] }
    end
    record = run.record
    outcomes = queues.map do |name, (queue, url, _, _)|
      done = record[:done].select { |id| id.start_with?("#{queue}-") }
      tally = done.tally.values
      report("(2) producer retry, #{name}", jobs: jobs, messages_sent: 2 * jobs, runs: done.size,
                                            jobs_run_once: tally.count(1), jobs_run_twice: tally.count(2),
                                            left: run.depth(url).sum)
      [name, runs_per_id(done)]
    end
    expected = queues.keys.map { |name| [name, name.start_with?("no key") ? { 2 => jobs } : { 1 => jobs }] }
    expect(outcomes).to eq(expected)
    expect(record[:overlaps]).to eq([])
  end

  def attribute(body)
    { "JobKey" => { data_type: "String", string_value: body[:job_key] } }
  end

  it "runs a job that raises again when SQS redelivers it (retry semantics kept)", time_limit: 90 do
    queue = uniq_name("flaky")
    url = run.queue(queue, VisibilityTimeout: 1)
    ids = (1..10).map { |i| "f#{i}" }
    run.send_bodies(url, ids.map { |id| { id: id, sleep: 0.2, fail_runs: 1 } })
    2.times { run.shoryuken({ queue => { "lock" => true } }) }
    run.wait_for("every job done", timeout: 60) { run.redis.llen("rec:done") >= ids.size }
    run.wait_for("every copy deleted", timeout: 30) { run.depth(url) == [0, 0] }
    record = run.record
    report("(4) job raises", messages: ids.size, starts: record[:starts].size,
                             failed_runs: record[:starts].size - record[:done].size, done: record[:done].size,
                             released_after_error: record[:events]["released_after_error"].to_i,
                             left: run.depth(url).sum)
    expect(runs_per_id(record[:starts])).to eq(2 => ids.size)
    expect(record[:done].sort).to eq(ids.sort)
    expect(record[:overlaps]).to eq([])
  end

  it "runs a job whose Shoryuken process was killed (kill -9) once more after the lease, never twice at once",
     time_limit: 120 do
    queue = uniq_name("killed")
    url = run.queue(queue, VisibilityTimeout: 2)
    ids = (1..4).map { |i| "k#{i}" }
    worker = { queue => { "lock" => { "lease" => 4 } } }
    victim = run.shoryuken(worker)
    run.send_bodies(url, ids.map { |id| { id: id, sleep: 6 } })
    run.wait_for("every job started in the first process", timeout: 30) { run.redis.llen("rec:starts") >= ids.size }
    run.shoryuken(worker)
    run.kill(victim)
    killed_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    run.wait_for("every job done by the second process", timeout: 60) { run.redis.llen("rec:done") >= ids.size }
    rerun_after = Process.clock_gettime(Process::CLOCK_MONOTONIC) - killed_at
    run.wait_for("every copy deleted", timeout: 30) { run.depth(url) == [0, 0] }
    record = run.record
    report("(5) kill -9 mid-job", messages: ids.size, starts: record[:starts].size, done: record[:done].size,
                                  overlaps: record[:overlaps].size,
                                  copies_left_while_leased: record[:events]["skipped_in_progress"].to_i,
                                  seconds_to_done_after_kill: rerun_after.round(1), left: run.depth(url).sum)
    expect(runs_per_id(record[:starts])).to eq(2 => ids.size)
    expect(record[:done].sort).to eq(ids.sort)
    expect(record[:overlaps]).to eq([])
    expect(rerun_after).to be >= 4 + 6 - 1 # the lease (4 s) ran out before a copy ran (6 s)
  end

  # Rails 8.1's ActiveJob::Continuable through Shoryuken 7's own adapter (its JobWrapper, locked by the
  # README's chain with `ferrolock_lock:`; spec/support/shoryuken_sqs_active_job_app.rb). A TERM makes
  # the adapter's stopping? true; each job stops at its next checkpoint and enqueues itself again (a
  # new SQS message, the same job_id), and the next Shoryuken process resumes it. Jobs locked on their
  # job_id (an idempotency key; one sent twice by its producer; one on a FIFO queue, whose dedup id
  # Shoryuken's adapter makes) and one on the message id (the default). Beside them, a job keyed on its
  # job_id that ActiveJob's retry_on enqueues again after its first attempt failed: the same kind of send.
  it "resumes a Rails 8.1 continuable job interrupted by a Shoryuken shutdown in the next process, each step once",
     time_limit: 120 do
    raise "needs FERROLOCK_RAILS=8.1 (bin/modern-test's shoryuken_sqs step sets it)" unless
      FerrolockTest::RailsVersion.eight_one?

    steps = 12
    # name => [queue, times its producer sends it, what locks it]
    jobs = { "keyed" => [uniq_name("ajkey"), 2, "the job_id"], "plain" => [uniq_name("ajmsg"), 1, "the message id"],
             "fifo" => ["#{uniq_name("ajkey")}.fifo", 1, "the job_id, FIFO queue"] }
    urls = jobs.values.to_h do |queue, _, _|
      [queue, run.queue(queue, VisibilityTimeout: 1, **(queue.end_with?(".fifo") ? { FifoQueue: true } : {}))]
    end
    app = { app: FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP, queues: urls.keys }
    first = run.shoryuken({}, **app)
    retried = jobs.fetch("keyed").first
    run.enqueue_active_jobs(jobs.map { |name, (queue, times, _)| [queue, "StepsJob", [name, steps, 0.3], times] } +
                            [[retried, "RetryOnceJob", ["retried"], 1]])
    attempts = -> { run.redis.lrange("rec:aj:attempts", 0, -1).map { |entry| JSON.parse(entry) } }
    done_steps = -> { run.redis.lrange("rec:aj:steps", 0, -1).map { |entry| JSON.parse(entry) } }
    run.wait_for("every job 3 steps in", timeout: 40) do
      done_steps.call.map(&:first).tally.values_at(*jobs.keys).all? { |count| count.to_i >= 3 }
    end
    run.kill(first, "TERM")
    second = run.shoryuken({}, **app)
    first_exit = run.reap(first)
    run.wait_for("the retry_on job retried", timeout: 30) { attempts.call.size >= 2 }
    run.wait_for("every step done", timeout: 30) { done_steps.call.size >= jobs.size * steps }
    run.wait_for("every copy deleted", timeout: 30) { urls.values.all? { |url| run.depth(url) == [0, 0] } }
    sleep 1.5 # a copy still on its way would come back after the 1 s visibility timeout
    record = run.record
    performs = run.redis.lrange("rec:aj:performs", 0, -1).map { |entry| JSON.parse(entry) }
    by_job = done_steps.call.group_by(&:first)
    jobs.each do |name, (queue, times, locked_on)|
      report("(6) ActiveJob continuation, locked on #{locked_on}",
             messages_sent: times, steps: steps, steps_run: by_job[name].size,
             steps_in_first_process: by_job[name].count { |_, _, pid| pid == first },
             steps_in_second_process: by_job[name].count { |_, _, pid| pid == second },
             performs: performs.count { |job, _, _| job == name }, left: run.depth(urls.fetch(queue)).sum)
    end
    report("(6) ActiveJob retry_on, locked on the job_id", attempts: attempts.call.size)
    report("(6) ActiveJob continuation, copies", skipped_in_progress: record[:events]["skipped_in_progress"].to_i,
                                                 deleted_as_processed: record[:events]["skipped_processed"].to_i)
    expect(first_exit).to be_success
    jobs.each_key do |name|
      expect(by_job[name].map { |_, step, _| step }).to eq((0...steps).to_a)
      # Interrupted in the first process, resumed (Continuable's resumptions: 1) in the second; the
      # producer's second send of "keyed" never ran.
      expect(performs.select { |job, _, _| job == name }).to eq([[name, 0, first], [name, 1, second]])
      expect(by_job[name].map(&:last).uniq).to eq([first, second])
    end
    expect(attempts.call.map { |name, attempt, _| [name, attempt] }).to eq([["retried", 1], ["retried", 2]])
    expect(record[:overlaps]).to eq([])
    expect(record[:events]["skipped_in_progress"].to_i + record[:events]["skipped_processed"].to_i).to be > 0
    expect(run.redis.lrange("rec:aj:locked_as", 0, -1).uniq.sort).to eq(%w[RetryOnceJob StepsJob])
  end

  # A producer's retry of one ActiveJob job (a copy from its serialized form, as an outbox resends it:
  # its body names a later enqueued_at) on FIFO queues with content-based dedup, through Shoryuken 7's
  # adapter. By default the adapter makes a dedup id of the job's arguments, so SQS itself drops the
  # second send (and would drop a distinct job with the same arguments too). With
  # `active_job_fifo_message_deduplication = false` the second send is a message of its own, and the
  # lock keyed on the job_id runs the job once. That message, received while the job runs, is skipped in
  # progress and comes back after the 2 s visibility timeout; received after, at once. Either way the
  # lock then deletes it as processed.
  it "runs a FIFO job sent twice once, with and without Shoryuken 7's FIFO dedup ids (content-based dedup on)",
     time_limit: 60 do
    queues = { "on" => "#{uniq_name("ajkey")}.fifo", "off" => "#{uniq_name("ajkey")}.fifo" }
    urls = queues.transform_values do |queue|
      run.queue(queue, FifoQueue: true, ContentBasedDeduplication: true, VisibilityTimeout: 2)
    end
    queues.each do |ids, queue|
      run.enqueue_active_jobs([[queue, "CountedJob", ["dedup-#{ids}"], 2, "copy"]],
                              env: { "FERROLOCK_SQS_FIFO_DEDUP_IDS" => ids })
    end
    accepted = urls.transform_values { |url| run.depth(url).first }
    run.shoryuken({}, app: FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP, queues: queues.values)
    runs = ->(ids) { run.redis.llen("rec:aj:counted:dedup-#{ids}") }
    run.wait_for("both jobs run", timeout: 30) { runs.call("on") >= 1 && runs.call("off") >= 1 }
    run.wait_for("every copy deleted", timeout: 15) { urls.values.all? { |url| run.depth(url) == [0, 0] } }
    sleep 2.5 # a second message still on its way would come back after the 2 s visibility timeout
    events = run.record[:events]
    report("(8) FIFO, a job sent twice", messages_with_dedup_ids: accepted["on"], runs_with: runs.call("on"),
                                         messages_without: accepted["off"], runs_without: runs.call("off"),
                                         skipped_in_progress: events["skipped_in_progress"].to_i,
                                         skipped_processed: events["skipped_processed"].to_i)
    expect(accepted).to eq("on" => 1, "off" => 2)
    expect([runs.call("on"), runs.call("off")]).to eq([1, 1])
    # Without the adapter's dedup ids, SQS delivered the second send too: the lock skipped it, and
    # deleted it as processed once the job had run.
    expect(events["skipped_processed"].to_i).to eq(1)
    expect(events["skipped_in_progress"].to_i).to be <= 1
  end

  # limits_concurrency through Shoryuken's own ActiveJob adapter, 7.0.3's and 6.2.1's (Rails has none:
  # 6.2's is ActiveJob::QueueAdapters::ShoryukenAdapter from its extensions, its processes real 6.2.1
  # ones on the same aws-sdk-sqs and Rails 8.1): the producer's enqueue admits two jobs (sent to SQS)
  # and parks four in Redis; each release in the worker enqueues the next through the adapter (a new
  # SQS message). The jobs count themselves in Redis as they perform.
  FerrolockTest::ShoryukenSqs::VERSIONS.each do |version|
    it "holds limits_concurrency's to: 2 through Shoryuken #{version}'s ActiveJob adapter, blocked jobs " \
       "promoted, each run once", time_limit: 60 do
      run.shoryuken_version = version
      queue = uniq_name("ajmsg")
      url = run.queue(queue, VisibilityTimeout: 5)
      app = { app: FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP, queues: [queue] }
      run.shoryuken({}, **app)
      run.enqueue_active_jobs((0...6).map { |num| [queue, "LimitedJob", ["k", num, 0.4], 1] })
      run.wait_for("6 jobs run", timeout: 30) { run.redis.llen("rec:lc:ran") >= 6 }
      run.wait_for("every copy deleted", timeout: 15) { run.depth(url) == [0, 0] }
      at_once = run.redis.lrange("rec:lc:at_once", 0, -1).map { |count| Integer(count) }
      ran = run.redis.lrange("rec:lc:ran", 0, -1).map { |num| Integer(num) }
      events = run.record[:events]
      report("(7) limits_concurrency to: 2, Shoryuken #{version}",
             jobs: 6, runs: ran.size, most_at_once: at_once.max, blocked: events["blocked"].to_i,
             promoted: events["promoted"].to_i)
      expect(run.redis.smembers("rec:aj:shoryuken")).to eq([version]) # the producer's and the worker's
      expect(at_once.size).to eq(6)
      expect(at_once.max).to eq(2) # 10 threads: the limit, not a lack of threads, kept it at 2
      expect(ran.sort).to eq((0...6).to_a)
      expect([events["blocked"].to_i, events["promoted"].to_i]).to eq([4, 4])
      expect(run.redis.keys("ferrolock:{concurrency:LimitedJob/k}:*").map { |key| run.redis.pttl(key) })
        .to all(be > 0)
    end
  end

  # The repromotion fix through Shoryuken 7's ActiveJob adapter: job 1 waits for job 0's slot in another
  # queue, which no process reads until the timer has promoted it twice (its first copy did not start
  # within its 2 s lease). Both copies are SQS messages of their own (the lock keys on the message id),
  # so both are received: one runs, the other is discarded as a duplicate at perform.
  it "runs a limits_concurrency job promoted twice once through Shoryuken 7's ActiveJob adapter", time_limit: 60 do
    first = uniq_name("ajrp")
    later = uniq_name("ajrp")
    run.queue(first, VisibilityTimeout: 5)
    later_url = run.queue(later, VisibilityTimeout: 5)
    app = FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP
    # A worker of `first` alone, booted before the jobs come: it runs job 0 at once, and its timer
    # promotes job 1 once job 0 gives its slot back, and again 2 s later.
    run.shoryuken({}, app: app, queues: [first])
    run.wait_for("the first worker booted", timeout: 30) { run.redis.llen("rec:aj:booted") >= 1 }
    run.enqueue_active_jobs([[first, "RepromotedJob", [0], 1], [later, "RepromotedJob", [1], 1]])
    run.wait_for("job 1 promoted twice", timeout: 30) { run.record[:events]["promoted"].to_i >= 2 }
    run.wait_for("both copies of job 1 in #{later}", timeout: 15) { run.depth(later_url).first >= 2 }
    run.shoryuken({}, app: app, queues: [later])
    run.wait_for("a copy of job 1 discarded", timeout: 30) { run.record[:events]["discarded"].to_i >= 1 }
    run.wait_for("every copy deleted", timeout: 15) { run.depth(later_url) == [0, 0] }
    ran = run.redis.lrange("rec:rp:ran", 0, -1).map { |num| Integer(num) }
    events = run.record[:events]
    report("(7b) a job promoted twice, Shoryuken 7", runs: ran.tally, promoted: events["promoted"].to_i,
                                                     discarded: events["discarded"].to_i)
    expect(ran.sort).to eq([0, 1])
    expect(events["discarded"].to_i).to eq(events["promoted"].to_i - 1) # every copy but the one that ran
    expect(run.redis.keys("ferrolock:{concurrency:repromoted}:*").map { |key| run.redis.pttl(key) }).to all(be > 0)
  end

  # ActiveJob::Uniqueness (activejob-uniqueness' API) through Shoryuken 7's own ActiveJob adapter: five
  # enqueues of one key send one message; its first attempt raises and retry_on's retry (a new message,
  # the same job_id) keeps the lock; once it ran, the key is free again.
  it "keeps unique :until_executed through Shoryuken 7's ActiveJob adapter: one sent, its retry under its own lock",
     time_limit: 60 do
    run.shoryuken_version = "7.0.3"
    queue = uniq_name("ajmsg")
    url = run.queue(queue, VisibilityTimeout: 5)
    run.shoryuken({}, app: FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP, queues: [queue])
    run.enqueue_active_jobs((0...5).map { |num| [queue, "UniqueSqsJob", ["u", num, 0.3], 1] })
    run.wait_for("the retry run", timeout: 30) { run.redis.llen("rec:uq:ran") >= 1 }
    run.wait_for("every copy deleted", timeout: 15) { run.depth(url) == [0, 0] }
    report("(8) unique :until_executed, Shoryuken 7.0.3",
           enqueued: 5, refused: run.redis.llen("rec:aj:refused"), runs: run.redis.llen("rec:uq:at_once"))
    expect(run.redis.llen("rec:aj:refused")).to eq(4)
    expect(run.redis.lrange("rec:uq:ran", 0, -1)).to eq(["0"]) # (the attempt that raised did not record)
    expect(run.redis.lrange("rec:uq:at_once", 0, -1)).to eq(%w[1 1]) # its first attempt and the retry
    expect(run.redis.keys("activejob_uniqueness:*")).to eq([])
    run.enqueue_active_jobs([[queue, "UniqueSqsJob", ["u", 9, 0], 1]])
    run.wait_for("a later job of the key run", timeout: 30) { run.redis.lrange("rec:uq:ran", 0, -1).include?("9") }
  end

  it "does not run a job again when its delete failed after success, and deletes it on its next delivery",
     time_limit: 150 do
    queue = uniq_name("undeleted")
    url = run.queue(queue, VisibilityTimeout: 3)
    gate = run.gate
    run.shoryuken({ queue => { "lock" => true } }, concurrency: 2, endpoint: gate.endpoint,
                                                   env: { "FERROLOCK_SQS_FAST_FAIL" => "1" })
    run.send_bodies(url, [{ id: "d1", sleep: 2 }])
    run.wait_for("the job started", timeout: 30) { run.redis.llen("rec:starts") >= 1 }
    gate.close # SQS unreachable from the worker while its job runs: AutoDelete's delete fails
    run.wait_for("the job done", timeout: 30) { run.redis.llen("rec:done") >= 1 }
    sleep 2
    in_flight = run.depth(url)
    gate.open
    # Shoryuken 7 stops itself when its fetcher failed 4 times in a row (Manager#handle_dispatch_error sends
    # it USR1), which the cut does when the fetcher's random 1-5 s pauses come out short on a busy machine:
    # a second process, reaching SQS directly, takes the next delivery if the first one is gone.
    run.shoryuken({ queue => { "lock" => true } }, concurrency: 2)
    # After failed receives Shoryuken's fetcher sleeps 1-5 s between its 3 tries before the next
    # dispatch, and moto answers slowly beside the other lanes (ci16 missed 30 s there; alone: seconds).
    run.wait_for("the copy deleted", timeout: 60) { run.depth(url) == [0, 0] }
    record = run.record
    report("(3) delete failed", starts: record[:starts].size, done: record[:done].size,
                                still_on_queue_after_failed_delete: in_flight.sum,
                                copies_deleted_as_processed: record[:events]["skipped_processed"].to_i,
                                left: run.depth(url).sum)
    expect(in_flight.sum).to eq(1) # the delete never reached SQS
    expect(record[:starts]).to eq(["d1"])
    expect(record[:done]).to eq(["d1"])
    expect(record[:events]["skipped_processed"].to_i).to be >= 1
  end

  # limits_concurrency's kill -9 through Shoryuken 7's ActiveJob adapter: the process running the job that
  # holds the key's one slot (lease 3 s) is killed while three more wait, parked in Redis. A new process
  # boots; SQS delivers the killed job's message again once its visibility timeout (4 s) and the lock's
  # lease (4 s) ran out, and its admission there frees the expired slot and starts that process's timer.
  it "frees a limits_concurrency slot whose Shoryuken process was killed (kill -9): the blocked jobs run once " \
     "each, and SQS's redelivery runs the killed job once more, one at a time", time_limit: 90 do
    queue = uniq_name("ajkill")
    url = run.queue(queue, VisibilityTimeout: 4)
    app = { app: FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP, queues: [queue],
            env: { "FERROLOCK_SQS_AJ_LEASE" => "4" } }
    victim = run.shoryuken({}, **app)
    run.enqueue_active_jobs([[queue, "LimitedKillJob", [0], 1]])
    run.wait_for("job 0 running", timeout: 30) { run.redis.llen("rec:lk:started") == 1 }
    run.enqueue_active_jobs((1..3).map { |num| [queue, "LimitedKillJob", [num], 1] })
    blocked = run.redis.llen("ferrolock:{concurrency:LimitedKillJob/kill}:blocked")
    run.kill(victim)
    killed_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    run.redis.del("rec:lk:now") # the killed run never counted itself out
    run.shoryuken({}, **app)
    run.wait_for("every job done", timeout: 60) { run.redis.llen("rec:lk:ran") >= 4 }
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - killed_at
    run.wait_for("every copy deleted", timeout: 20) { run.depth(url) == [0, 0] }
    starts = run.redis.lrange("rec:lk:started", 0, -1).map { |line| Integer(line.split.first) }
    at_once = run.redis.lrange("rec:lk:at_once", 0, -1).map { |count| Integer(count) }
    ran = run.redis.lrange("rec:lk:ran", 0, -1).map { |num| Integer(num) }
    report("(9) limits_concurrency kill -9", blocked_at_kill: blocked, runs_per_job: starts.tally.inspect.delete(" "),
                                             most_at_once: at_once.max, seconds_to_done_after_kill: took.round(1))
    expect(blocked).to eq(3)
    expect(ran.sort).to eq([0, 1, 2, 3]) # each done once
    expect(starts.tally).to eq(0 => 2, 1 => 1, 2 => 1, 3 => 1) # the killed run, and SQS's redelivery
    expect(at_once.max).to eq(1)
    expect(run.depth(url)).to eq([0, 0])
  end

  # activejob-uniqueness' five strategies (ferrolock's drop-in) and the dual_lock macro through Shoryuken 7's
  # ActiveJob adapter: a producer enqueues 4 copies of each strategy's job and 6 of a dual_lock job (one key)
  # before the worker starts, and one more of each strategy once all are done.
  it "holds activejob-uniqueness' five strategies and dual_lock through Shoryuken 7's ActiveJob adapter",
     time_limit: 90 do
    unless File.exist?(File.join(FerrolockTest::LIB, "active_job", "uniqueness.rb"))
      skip("needs h-unique (ActiveJob uniqueness and the dual_lock macro)")
    end
    queue = uniq_name("ajuniq")
    url = run.queue(queue)
    names = %w[UntilExecuting UntilExecuted UntilExpired UntilAndWhileExecuting WhileExecuting].map { |s| "Sh#{s}Job" }
    jobs = names.flat_map { |name| (0...4).map { |num| [queue, name, ["k", num, 2.5], 1] } }
    run.enqueue_active_jobs(jobs + (0...6).map { |num| [queue, "ShDualLockJob", ["k", num, 3], 1] })
    refused_first = run.redis.lrange("rec:aj:refused", 0, -1).tally
    run.shoryuken({}, app: FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP, queues: [queue], concurrency: 25)
    run.wait_for("every copy handled", timeout: 40) { run.depth(url) == [0, 0] }
    run.enqueue_active_jobs(names.map { |name| [queue, name, ["k", 20, 0.1], 1] })
    run.wait_for("the last copies handled", timeout: 30) { run.depth(url) == [0, 0] }
    refused = run.redis.lrange("rec:aj:refused", 0, -1).tally
    starts = run.redis.lrange("rec:uq:started", 0, -1).map { |line| line.split.first }.tally
    maxima = (names + ["ShDualLockJob"]).to_h do |name|
      [name, run.redis.lrange("rec:uq:at_once:#{name}", 0, -1).map { |count| Integer(count) }.max]
    end
    locks = run.redis.keys("activejob_uniqueness:*")
    report("(10) uniqueness and dual_lock", refused_of_first_copies: refused_first.inspect.delete(" "),
                                            refused_in_all: refused.inspect.delete(" "),
                                            performed: starts.inspect.delete(" "), locks_left: locks.size)
    expect(refused_first).to eq(names.first(4).to_h { |name| [name, 3] })
    expect(refused).to eq(refused_first.merge("ShUntilExpiredJob" => 4)) # only until_expired's lock outlives its job
    expect(starts.values_at(*names.first(4), "ShDualLockJob")).to eq([2, 2, 1, 2, 2])
    expect(starts["ShWhileExecutingJob"]).to be_between(2, 5) # one of the first four at once, and the last
    expect(maxima.values).to all(eq(1))
    expect(locks.size).to eq(1)
    expect(locks.first).to start_with("activejob_uniqueness:sh_until_expired_job:")
  end
end
