# frozen_string_literal: true

require "spec_helper"
require_relative "support/shoryuken_sqs"

# An operator pauses a Shoryuken queue's lock (Admin#pause(queue, kind: :shoryuken_lock)) while REAL
# Shoryuken 7.0.3 processes (vendored, unmodified) consume a REAL queue of moto: once a second has
# passed, no process runs a message of it; each goes back to SQS for paused_delay and comes again;
# resumed, every message runs once and the queue empties. Counts come from the workers' own record in
# Redis (spec/support/shoryuken_sqs_app.rb). Runs in the modern root: bin/modern test shoryuken_sqs.
RSpec.describe "Pausing a Shoryuken queue's lock in real Shoryuken 7.0.3 processes against moto" do
  before do
    skip("bin/modern test shoryuken_sqs runs it (FERROLOCK_SQS_LANE=1)") unless ENV["FERROLOCK_SQS_LANE"]
    reason = FerrolockTest::ShoryukenSqs.missing
    raise "shoryuken_sqs lane: #{reason}" if reason

    @run = FerrolockTest::ShoryukenSqs::Run.new(FerrolockTest.redis_server)
  end

  after do
    Ferrolock::Admin.new.clear_override(@queue, kind: :shoryuken_lock) if @queue
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
end
