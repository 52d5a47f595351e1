# frozen_string_literal: true

require "spec_helper"
require_relative "support/shoryuken_sqs"

# An operator pauses a Shoryuken queue's lock (Admin#pause(queue, kind: :shoryuken_lock)) while REAL
# Shoryuken 7.0.3 processes (vendored, unmodified) consume a REAL queue of moto: once a second has
# passed, no process runs a message of it; each goes back to SQS for paused_delay and comes again;
# resumed, every message runs once and the queue empties. Counts come from the workers' own record in
# Redis (spec/support/shoryuken_sqs_app.rb). And an ActiveJob limits_concurrency key's limit changed live
# in the same kind of processes. Runs in the modern root: bin/modern test shoryuken_sqs.
RSpec.describe "Limits changed live in real Shoryuken 7.0.3 processes against moto" do
  before do
    skip("bin/modern test shoryuken_sqs runs it (FERROLOCK_SQS_LANE=1)") unless ENV["FERROLOCK_SQS_LANE"]
    reason = FerrolockTest::ShoryukenSqs.missing
    raise "shoryuken_sqs lane: #{reason}" if reason

    @run = FerrolockTest::ShoryukenSqs::Run.new(FerrolockTest.redis_server)
  end

  after do
    Ferrolock::Admin.new.clear_override(@queue, kind: :shoryuken_lock) if @queue
    @keys&.each { |key| Ferrolock::Admin.new.clear_override(key, kind: :limits_concurrency) }
    @run&.close
  end

  let(:run) { @run }

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  it "runs nothing of a paused queue in two processes, loses nothing, and runs every message once when resumed",
     time_limit: 120 do
    @queue = queue = "paused-#{SecureRandom.hex(4)}"
    url = run.queue(queue, VisibilityTimeout: 30)
    admin = Ferrolock::Admin.new
    2.times { run.shoryuken({ queue => { "lock" => { "paused_delay" => 2 } } }, concurrency: 5) }
    before = (1..10).map { |i| "b#{i}" }
    run.send_bodies(url, before.map { |id| { id: id } })
    run.wait_for("the first 10 run", timeout: 60) { run.redis.llen("rec:done") >= before.size }

    admin.pause(queue, kind: :shoryuken_lock)
    paused_at = monotonic
    # Every process's reading is at most QueuePause::REFRESH old: from then on, none runs a message.
    sleep 0.05 while monotonic - paused_at < Ferrolock::Shoryuken::QueuePause::REFRESH
    paused = (1..20).map { |i| "p#{i}" }
    run.send_bodies(url, paused.map { |id| { id: id } })
    # Each held message comes back after paused_delay (2 s): three rounds of holds, nothing run.
    run.wait_for("every paused message held three times", timeout: 60) do
      run.record[:events]["rescheduled"].to_i >= 3 * paused.size
    end
    while_paused = run.record
    depth_paused = run.depth(url)

    admin.resume(queue, kind: :shoryuken_lock)
    resumed_at = monotonic
    run.wait_for("every paused message run", timeout: 60) { run.redis.llen("rec:done") >= before.size + paused.size }
    took = monotonic - resumed_at
    run.wait_for("the queue empty", timeout: 30) { run.depth(url) == [0, 0] }
    sleep 2.5 # a copy handed back just before the resume would be delivered within paused_delay
    record = run.record
    puts "\n  shoryuken_sqs pause: messages=#{paused.size} held=#{while_paused[:events]["rescheduled"]} " \
         "runs_while_paused=#{while_paused[:starts].size - before.size} depth_while_paused=#{depth_paused.sum} " \
         "all_run_after_resume_s=#{took.round(1)} runs=#{record[:starts].size} left=#{run.depth(url).sum}"
    expect(while_paused[:starts].sort).to eq(before.sort) # nothing ran while paused
    expect(depth_paused.sum).to eq(paused.size) # nor was deleted
    expect(record[:starts].tally.values.uniq).to eq([1]) # resumed: each message once
    expect(record[:done].sort).to eq((before + paused).sort)
    expect(record[:overlaps]).to eq([])
    expect(run.depth(url)).to eq([0, 0])
  end

  # [key, num] of each LiveLimitJob run recorded in `list` (spec/support/shoryuken_sqs_active_job_app.rb).
  def live_runs(list, key)
    run.redis.lrange(list, 0, -1).map(&:split).select { |k, _, _| k == key }.map { |_, num, _| Integer(num) }
  end

  def live_max(key) = Integer(run.redis.get("rec:ll:max:#{key}") || 0)

  # A limits_concurrency key's limit changed live (issue 41, item 5), as the Web tab and `ferrolock limit
  # --concurrency` call Admin, while two REAL Shoryuken 7.0.3 processes run LiveLimitJob (to: 2 in the code,
  # 0.3 s each) through Shoryuken's own ActiveJob adapter; a producer process enqueues. The releases in the
  # workers promote the blocked jobs (each a new SQS message) under the limit in force; after a resume, the
  # workers' timers do. The same on Sidekiq: spec/active_job_live_limit_processes_spec.rb; Solid Queue:
  # spec/solid_queue_live_limit_spec.rb.
  it "moves ActiveJob limits_concurrency's measured concurrency when its limit is raised live, blocks a paused " \
     "key's jobs and runs each once when resumed (Shoryuken 7's adapter, two processes)", time_limit: 120 do
    @keys = %w[LiveLimitJob/mid LiveLimitJob/held]
    queue = "ajlive-#{SecureRandom.hex(4)}"
    url = run.queue(queue, VisibilityTimeout: 30)
    admin = Ferrolock::Admin.new
    2.times { run.shoryuken({}, app: FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP, queues: [queue]) }

    # The code's 2, then 4 set live while the key's 24 jobs run: the most at once moves from 2 to 4.
    run.enqueue_active_jobs((0...24).map { |num| [queue, "LiveLimitJob", ["mid", num], 1] })
    run.wait_for("6 jobs done under the code's limit", timeout: 40) { live_runs("rec:ll:done", "mid").size >= 6 }
    before_raise = live_max("mid")
    raised = monotonic
    admin.set_limit("LiveLimitJob/mid", 4, kind: :limits_concurrency)
    run.redis.set("rec:ll:max:mid", 0) # from now on
    run.wait_for("4 at once", timeout: 20, every: 0.02) { live_max("mid") >= 4 }
    to_four = monotonic - raised
    run.wait_for("24 jobs done", timeout: 40) { live_runs("rec:ll:done", "mid").size >= 24 }
    after_raise = live_max("mid")

    # Paused: every job is blocked in Redis at its enqueue; the workers' timers visit the key and promote
    # nobody; resumed, they promote the jobs (2 at once: the code's limit again).
    admin.pause("LiveLimitJob/held", kind: :limits_concurrency)
    run.enqueue_active_jobs((0...12).map { |num| [queue, "LiveLimitJob", ["held", num], 1] })
    blocked = run.redis.llen("ferrolock:{concurrency:LiveLimitJob/held}:blocked")
    sleep 1.5
    started_paused = live_runs("rec:ll:started", "held").size
    resumed = monotonic
    admin.resume("LiveLimitJob/held", kind: :limits_concurrency)
    run.wait_for("a resumed job started", timeout: 20, every: 0.02) { live_runs("rec:ll:started", "held").any? }
    first_start = monotonic - resumed
    run.wait_for("the resumed key's 12 jobs done", timeout: 40) { live_runs("rec:ll:done", "held").size >= 12 }
    run.wait_for("every message deleted", timeout: 20) { run.depth(url) == [0, 0] }
    pids = run.redis.lrange("rec:ll:done", 0, -1).map { |line| line.split.last }.uniq.size
    puts "\n  shoryuken_sqs live limit: max_before_raise=#{before_raise} raise_to_4_at_once_s=#{to_four.round(2)} " \
         "max_after_raise=#{after_raise} blocked_while_paused=#{blocked} started_while_paused=#{started_paused} " \
         "resume_to_first_start_s=#{first_start.round(2)} max_resumed=#{live_max("held")} worker_processes=#{pids}"
    expect(before_raise).to eq(2)
    expect(after_raise).to eq(4)
    expect(live_runs("rec:ll:started", "mid")).to match_array(0...24) # each once
    expect(blocked).to eq(12)
    expect(started_paused).to eq(0)
    expect(live_runs("rec:ll:started", "held")).to match_array(0...12) # each once, none dropped
    expect(live_runs("rec:ll:done", "held")).to match_array(0...12)
    expect(live_max("held")).to eq(2)
  end

  # The worker has admitted no limited job since it booted and the producer that parked the paused key's
  # jobs has exited: only the timer the worker started at boot (ExpiryTimer.start in the app's :startup hook,
  # the set-up without Rails) can promote them once resumed. Without that hook they stayed parked.
  it "runs a paused key's jobs once resumed when no live process has admitted a limited job yet", time_limit: 60 do
    @keys = %w[LiveLimitJob/fresh]
    queue = "ajfresh-#{SecureRandom.hex(4)}"
    run.queue(queue, VisibilityTimeout: 30)
    run.shoryuken({}, app: FerrolockTest::ShoryukenSqs::ACTIVE_JOB_APP, queues: [queue])
    Ferrolock::Admin.new.pause("LiveLimitJob/fresh", kind: :limits_concurrency)
    run.enqueue_active_jobs((0...4).map { |num| [queue, "LiveLimitJob", ["fresh", num], 1] })
    run.wait_for("the worker booted", timeout: 30) { run.redis.llen("rec:aj:booted") >= 1 }
    Ferrolock::Admin.new.resume("LiveLimitJob/fresh", kind: :limits_concurrency)
    # A timer visits within a second; then four jobs of 0.3 s, 2 at once.
    run.wait_for("the resumed jobs done", timeout: 20) { live_runs("rec:ll:done", "fresh").size >= 4 }
    expect(live_runs("rec:ll:started", "fresh")).to match_array(0...4)
  end
end
