# frozen_string_literal: true

require "spec_helper"
require_relative "support/solid_queue_run"

# A limits_concurrency key's limit changed live (issue 41, item 5) while REAL Solid Queue 1.5.0 processes
# (vendored: a supervisor forking a dispatcher and two worker processes) work its jobs
# (spec/fixtures/solid_queue_app's SqFerrolockLimitJob: to: 2 in the code, 0.2 s each, counted in Redis).
# An operator's Admin (the app's console process) changes it. Runs in the modern root: bin/modern test
# solid_queue (spec/active_job_live_limit_processes_spec.rb proves the same on Sidekiq).
RSpec.describe "ActiveJob limits_concurrency changed live in Solid Queue processes", time_limit: 150 do
  before do
    skip("bin/modern test solid_queue runs it (FERROLOCK_SOLID_QUEUE_LANE=1)") unless ENV["FERROLOCK_SOLID_QUEUE_LANE"]
    reason = FerrolockTest::SolidQueueRun.missing
    raise "solid_queue lane: #{reason}" if reason

    @run = FerrolockTest::SolidQueueRun::Run.new(FerrolockTest.redis_server)
  end

  after { @run&.close }

  let(:run) { @run }
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:console) { run.console }

  def admin(call) = console.evaluate("Ferrolock::Admin.new.#{call}.to_h")

  def nums(list, key)
    redis.lrange(list, 0, -1).map(&:split).select { |k, _, _| k == key }.map { |_, num, _| Integer(num) }
  end

  def max(key) = Integer(redis.get("sq:max:#{key}") || 0)

  def enqueue(key, count) = console.evaluate("#{count}.times { |n| SqFerrolockLimitJob.perform_later(#{key.dump}, n) }")

  it "pause blocks every job of the key and resume runs each once; a limit raised or lowered mid-run moves the " \
     "measured concurrency" do
    run.supervisor(workers: 2, threads: 5)

    # Paused: every job is blocked in Redis; the timers visit the key (every 0.2 s) and promote nobody.
    expect(admin(%(pause("SqFerrolockLimitJob/held", kind: :limits_concurrency)))).to include("paused" => true)
    enqueue("held", 12)
    expect(redis.llen("ferrolock:{concurrency:SqFerrolockLimitJob/held}:blocked")).to eq(12)
    sleep 1.5
    started_paused = nums("sq:started", "held").size
    resumed = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    admin('resume("SqFerrolockLimitJob/held", kind: :limits_concurrency)')
    run.wait_for("the resumed key's 12 jobs done", timeout: 60) { nums("sq:done", "held").size >= 12 }
    resumed_took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - resumed

    # The code's 2, then 4 set live while the key's 40 jobs run: the most at once moves from 2 to 4.
    enqueue("mid", 40)
    run.wait_for("6 jobs done under the code's limit", timeout: 60) { nums("sq:done", "mid").size >= 6 }
    before_raise = max("mid")
    admin('set_limit("SqFerrolockLimitJob/mid", 4, kind: :limits_concurrency)')
    redis.set("sq:max:mid", 0) # from now on
    run.wait_for("40 jobs done", timeout: 90) { nums("sq:done", "mid").size >= 40 }
    after_raise = max("mid")

    # Lowered to 1 before the jobs come: never 2 at once.
    admin('set_limit("SqFerrolockLimitJob/low", 1, kind: :limits_concurrency)')
    enqueue("low", 8)
    run.wait_for("8 jobs done", timeout: 60) { nums("sq:done", "low").size >= 8 }
    workers = redis.lrange("sq:done", 0, -1).map { |line| line.split[2] }.uniq.size
    puts "\n  solid_queue live limit: started_while_paused=#{started_paused} resume_to_all_done_s=" \
         "#{resumed_took.round(1)} max_before_raise=#{before_raise} max_after_raise=#{after_raise} " \
         "max_lowered=#{max("low")} worker_processes=#{workers}"
    expect(started_paused).to eq(0)
    expect(nums("sq:started", "held")).to match_array(0...12) # each once
    expect(nums("sq:done", "held")).to match_array(0...12)
    expect(max("held")).to eq(2) # resumed: the code's limit
    expect(before_raise).to eq(2)
    expect(after_raise).to eq(4)
    expect(nums("sq:started", "mid")).to match_array(0...40)
    expect(max("low")).to eq(1)
    expect(nums("sq:started", "low")).to match_array(0...8)
  ensure
    %w[held mid low].each do |key|
      admin(%(clear_override("SqFerrolockLimitJob/#{key}", kind: :limits_concurrency))) if @run
    end
  end

  # Under a limit set live (3; the code's is 1): a job that fails before its perform gives its slot back
  # at once (else the key would stall for the 30 s lease), a job that raises in its perform too, and each
  # retry takes a slot again under the live limit.
  it "keeps a live limit through failures before perform and retries, each job done once" do
    run.supervisor(workers: 2, threads: 5)
    admin('set_limit("SqLiveRetryJob/retry", 3, kind: :limits_concurrency)')
    modes = (0...12).to_h { |num| [num, %w[before perform ok ok][num % 4]] }
    console.evaluate("#{modes.to_a.inspect}.each { |num, mode| SqLiveRetryJob.perform_later('retry', num, mode) }")
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    run.wait_for("12 jobs done (well within the 30 s lease)", timeout: 25) { nums("sq:done", "retry").size >= 12 }
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    starts = nums("sq:started", "retry").tally
    puts "\n  solid_queue live limit, failures: jobs=12 max=#{max("retry")} seconds=#{took.round(1)} " \
         "performs=#{starts.values.sum}"
    expect(nums("sq:done", "retry")).to match_array(0...12) # each once
    expect(starts).to eq(modes.transform_values { |mode| mode == "perform" ? 2 : 1 })
    expect(max("retry")).to eq(3)
  ensure
    admin('clear_override("SqLiveRetryJob/retry", kind: :limits_concurrency)') if @run
  end
end
