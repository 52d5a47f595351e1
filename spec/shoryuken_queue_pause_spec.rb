# frozen_string_literal: true

require "spec_helper"
require "json"
require_relative "support/real_shoryuken"

# An operator pauses a Shoryuken queue's lock (issue 41, item 5): Admin#pause(queue, kind: :shoryuken_lock).
# Each process reads the pause at most once a second per queue (Shoryuken::QueuePause), never per
# message; a paused queue's messages are neither run nor deleted but handed back to SQS for
# paused_delay; resumed, each runs once. Real Shoryuken 6.2.1 in a child (fake SQS API, recording
# what Shoryuken asked of it); bin/modern test shoryuken_sqs runs the same on real Shoryuken 7 processes
# against moto (spec/shoryuken_sqs_pause_spec.rb).
RSpec.describe "pausing a Shoryuken queue's lock" do
  include FerrolockTest::RealShoryuken::Examples

  let(:admin) { Ferrolock::Admin.new }
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:key) { "ferrolock:{msg:orders}:override" }

  after { admin.clear_override("orders", kind: :shoryuken_lock) }

  it "is paused and resumed through Admin, listed, kept in Redis with a TTL, and evented" do
    events = []
    subscription = Ferrolock.subscribe(:limit_changed) { |_, payload| events << payload }
    expect(admin.pause("orders", kind: :shoryuken_lock).to_h).to eq(limit: nil, paused: true)
    expect(admin.limit_override("orders", kind: :shoryuken_lock).paused).to be(true)
    expect(redis.pttl(key)).to be > 0
    expect(admin.paused_queues.items.map(&:name)).to eq(["orders"])
    expect(admin.paused_queues("ord*").items.map(&:name)).to eq(["orders"])
    expect(admin.paused_queues("other").items).to eq([])
    expect(admin.limiters.items.map(&:name)).not_to include("msg:orders") # not a limiter
    expect { admin.set_limit("orders", 2, kind: :shoryuken_lock) }.to raise_error(ArgumentError, /no limit to set/)

    expect(admin.resume("orders", kind: :shoryuken_lock).to_h).to eq(limit: nil, paused: false)
    expect(redis.exists(key)).to eq(0)
    expect(admin.paused_queues.items).to eq([])
    expect(events).to eq([{ primitive: :shoryuken_lock, name: "orders", action: :pause, limit: nil, paused: true,
                            queue: "orders" },
                          { primitive: :shoryuken_lock, name: "orders", action: :resume, limit: nil, paused: false,
                            queue: "orders" }])
  ensure
    Ferrolock.unsubscribe(subscription) if subscription
  end

  # "Within a second in every process": a process whose last read was just before the pause reads
  # again at its first message REFRESH later. Its messages in between cost no round trip.
  it "reaches another process within QueuePause::REFRESH, reading Redis about once a second, not per message" do
    code = <<~RUBY
      require "ferrolock"
      require "ferrolock/shoryuken"
      require "json"
      pause = Ferrolock::Shoryuken::QueuePause
      client = Ferrolock.client
      $stdout.sync = true
      reads = -> { client.call("INFO", "commandstats")[/cmdstat_hmget:calls=(\\d+)/, 1].to_i }
      before = reads.call
      calls = 0
      t0 = Ferrolock.monotonic
      while Ferrolock.monotonic - t0 < 2.5
        pause.paused?(client, "orders")
        calls += 1
      end
      puts JSON.generate(reads: reads.call - before, calls: calls, paused: pause.paused?(client, "orders"))
      $stdin.gets # the parent paused the queue, then waited REFRESH
      # A batch's threads all at once: the one re-reading must not leave the others the stale reading.
      gate = Queue.new
      threads = Array.new(8) { Thread.new { gate.pop; pause.paused?(client, "orders") } }
      8.times { gate << true }
      puts JSON.generate(paused: threads.map(&:value).uniq)
    RUBY
    env = { "REDIS_URL" => FerrolockTest.redis_server.url }
    IO.popen(env, [RbConfig.ruby, "-I", FerrolockTest::LIB, "-e", code], "r+") do |child|
      first = JSON.parse(Timeout.timeout(30) { child.gets })
      # 2.5 s of messages: a read at the first, then one per REFRESH (the INFO calls are not HMGETs).
      expect(first["reads"]).to be_between(1, 4)
      expect(first["calls"]).to be > 1000
      expect(first["paused"]).to be(false)
      admin.pause("orders", kind: :shoryuken_lock)
      paused_at = Ferrolock.monotonic
      sleep 0.01 while Ferrolock.monotonic - paused_at < Ferrolock::Shoryuken::QueuePause::REFRESH
      child.puts("go")
      expect(JSON.parse(Timeout.timeout(30) { child.gets })).to eq("paused" => [true])
    end
  end

  it "in real Shoryuken: a paused queue's message is neither run nor deleted but handed back for paused_delay; " \
     "resumed, it runs once" do
    result = scenario(worker("Charge", "orders", "auto_delete: true, ferrolock_lock: { paused_delay: 7 }") + <<~RUBY)
      admin = Ferrolock::Admin.new
      pause = Ferrolock::Shoryuken::QueuePause
      admin.pause("orders", kind: :shoryuken_lock)
      pause.reset! # (this process read no pause yet; another one would within a second)
      first = C.deliver("m1")
      outcome1 = R.process("orders", R.receive("orders").fetch(0))
      after_pause = { runs: R.runs("m1"), deleted: R.batch_deleted + R.receipts(:delete_message),
                      visibility: C.calls_to(:change_message_visibility).map { |c| [c[:receipt_handle], c[:visibility_timeout]] },
                      state: R.state("orders", "m1") }
      admin.resume("orders", kind: :shoryuken_lock)
      pause.reset!
      again = C.deliver("m1") # SQS's next delivery of it
      outcome2 = R.process("orders", R.receive("orders").fetch(0))
      R.report(outcomes: [outcome1, outcome2], after_pause: after_pause, first: first.receipt_handle,
               again: again.receipt_handle, runs: R.runs("m1"), batch_deleted: R.batch_deleted,
               events: R.events.map { |name, payload| [name, payload[:reason], payload[:delay]] })
    RUBY
    expect(result["outcomes"]).to eq(%w[ok ok])
    expect(result["after_pause"]).to eq("runs" => 0, "deleted" => [], "visibility" => [[result["first"], 7]],
                                        "state" => [nil, -2])
    expect(result["runs"]).to eq(1)
    expect(result["batch_deleted"]).to eq([result["again"]])
    expect(result["events"]).to eq([["limit_changed", nil, nil], ["rescheduled", "paused", 7],
                                    ["limit_changed", nil, nil], ["locked", nil, nil], ["released", nil, nil]])
  end

  it "checks paused_delay at boot" do
    expect { Ferrolock::Shoryuken::LockMiddleware.new(paused_delay: 0) }.to raise_error(ArgumentError, /1 to 43200/)
    expect { Ferrolock::Shoryuken::LockMiddleware.new(paused_delay: 1.5) }.to raise_error(TypeError, /paused_delay/)
    expect(Ferrolock::Shoryuken::Settings.new({}).paused_delay).to eq(10)
  end
end
