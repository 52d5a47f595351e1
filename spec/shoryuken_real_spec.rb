# frozen_string_literal: true

require "spec_helper"
require_relative "support/real_shoryuken"

# Ferrolock::Shoryuken::LockMiddleware inside the REAL Shoryuken 6.2.1 (vendored, unmodified): the real
# Shoryuken::Processor.process, the real default server chain with the Lock inserted before
# AutoDelete as the README says, real Shoryuken::Message objects from Shoryuken::Queue, workers
# with `include Shoryuken::Worker`. Only the SQS API is fake (spec/support/fake_sqs_client.rb),
# and it records what Shoryuken asked SQS to do. Each example runs in its own child process.
RSpec.describe "Ferrolock::Shoryuken::LockMiddleware in the real Shoryuken 6.2.1" do
  include FerrolockTest::RealShoryuken::Examples

  it "inserts the Lock between ExponentialBackoffRetry and AutoDelete" do
    result = scenario("RealShoryuken.report(chain: RealShoryuken.chain_names)")
    expect(result["chain"]).to eq(%w[Timing ExponentialBackoffRetry LockMiddleware AutoDelete AutoExtendVisibility])
  end

  it "runs a message delivered twice once, marks it processed for processed_ttl, and deletes the second copy" do
    result = scenario(worker("Charge", "payments", "auto_delete: true, ferrolock_lock: true") + <<~RUBY)
      id = "dup-\#{SecureRandom.hex(8)}"
      first = C.deliver(id)
      outcome1 = R.process("payments", R.receive("payments").fetch(0))
      events1 = R.events
      copy = C.deliver(id)
      outcome2 = R.process("payments", R.receive("payments").fetch(0))
      R.report(outcomes: [outcome1, outcome2], runs: R.runs(id), batch_deleted: R.batch_deleted,
               deleted: R.receipts(:delete_message), first: first.receipt_handle, copy: copy.receipt_handle,
               state: R.state("payments", id), events1: events1, events: R.event_names, id: id)
    RUBY
    expect(result["outcomes"]).to eq(%w[ok ok])
    expect(result["runs"]).to eq(1)
    expect(result["batch_deleted"]).to eq([result["first"]]) # AutoDelete, after the run
    expect(result["deleted"]).to eq([result["copy"]]) # the Lock, through Shoryuken::Message#delete
    value, ttl = result["state"]
    expect(value).to eq("processed")
    expect(ttl).to be_between(3_500_000, 3_600_000)
    locked = { "primitive" => "shoryuken_lock", "queue" => "payments", "message_id" => result["id"],
               "worker" => "Charge" }
    # :released once marked processed, with how long the lease was held (seconds).
    expect(result["events1"]).to match([["locked", hash_including(locked)],
                                        ["released", hash_including(locked.merge("held" => a_kind_of(Float)))]])
    expect(result["events"]).to eq(%w[locked released skipped_processed])
  end

  it "leaves a copy alone while the original runs, then deletes later copies" do
    hold = "if run == 1 then $entered << true; $release.pop end"
    result = scenario(worker("Slow", "slow", "auto_delete: true, ferrolock_lock: true", hold) + <<~RUBY)
      $entered = Queue.new
      $release = Queue.new
      id = "busy-\#{SecureRandom.hex(8)}"
      first = C.deliver(id)
      original = R.process_in_background("slow", $entered)
      copy = C.deliver(id)
      during = R.process("slow", R.receive("slow").fetch(0))
      runs_during = R.runs(id)
      deletes_during = C.calls_to(:delete_message).size + C.calls_to(:delete_message_batch).size
      $release << true
      original_outcome = original.value
      late = C.deliver(id)
      after = R.process("slow", R.receive("slow").fetch(0))
      R.report(during: during, runs_during: runs_during, deletes_during: deletes_during,
               original: original_outcome, runs: R.runs(id), batch_deleted: R.batch_deleted,
               deleted: R.receipts(:delete_message), after: after,
               first: first.receipt_handle, copy: copy.receipt_handle, late: late.receipt_handle)
    RUBY
    expect(result).to include("during" => "ok", "runs_during" => 1, "deletes_during" => 0,
                              "original" => "ok", "after" => "ok", "runs" => 1)
    expect(result["batch_deleted"]).to eq([result["first"]])
    expect(result["deleted"]).to eq([result["late"]]) # the copy seen while running was never deleted
  end

  it "drops the lock when the job fails: the error propagates, nothing is deleted, the next copy runs" do
    fail_once = 'raise "card declined" if run == 1'
    result = scenario(worker("Flaky", "flaky", "auto_delete: true, ferrolock_lock: true", fail_once) + <<~RUBY)
      id = "fail-\#{SecureRandom.hex(8)}"
      first = C.deliver(id)
      outcome1 = R.process("flaky", R.receive("flaky").fetch(0))
      deletes_after_failure = C.calls_to(:delete_message).size + C.calls_to(:delete_message_batch).size
      state_after_failure = R.state("flaky", id)
      copy = C.deliver(id)
      outcome2 = R.process("flaky", R.receive("flaky").fetch(0))
      late = C.deliver(id)
      outcome3 = R.process("flaky", R.receive("flaky").fetch(0))
      R.report(outcomes: [outcome1, outcome2, outcome3], deletes_after_failure: deletes_after_failure,
               runs: R.runs(id), batch_deleted: R.batch_deleted, deleted: R.receipts(:delete_message),
               copy: copy.receipt_handle, late: late.receipt_handle, state_after_failure: state_after_failure,
               released: R.events.select { |name, _| name == :released_after_error }, id: id)
    RUBY
    expect(result["outcomes"]).to eq(%w[RuntimeError ok ok]) # Processor.process re-raised the job's error
    expect(result["deletes_after_failure"]).to eq(0)
    expect(result["state_after_failure"]).to eq([nil, -2]) # released at once, not after lock_ttl
    expect(result["released"]).to match([["released_after_error",
                                          hash_including("error" => "RuntimeError", "message_id" => result["id"],
                                                         "held" => a_kind_of(Float))]])
    expect(result["runs"]).to eq(2) # the retry ran; the copy after its success did not
    expect(result["batch_deleted"]).to eq([result["copy"]])
    expect(result["deleted"]).to eq([result["late"]])
  end

  it "lets batch workers (an Array of messages) through untouched, warning once" do
    options = "auto_delete: true, batch: true, ferrolock_lock: true"
    result = scenario(worker("Batch", "batch-q", options) + <<~RUBY)
      ids = Array.new(2) { "batch-\#{SecureRandom.hex(8)}" }
      batch_ids = []
      outcomes = Array.new(2) do
        ids.each { |id| C.deliver(id) }
        messages = R.receive_batch("batch-q")
        raise "expected 2 messages, got \#{messages.size}" unless messages.size == 2

        batch_ids << messages.message_id
        R.process("batch-q", messages)
      end
      R.report(outcomes: outcomes, runs: R.runs("batch"), batch_deletes: C.calls_to(:delete_message_batch).size,
               batch_deleted: R.batch_deleted.size, deleted: R.receipts(:delete_message).size,
               warnings: R::FERROLOCK_LOG.string.scan("is a batch worker").size, batch_ids: batch_ids,
               keys: R.redis.keys("*"), events: R.events)
    RUBY
    expect(result["outcomes"]).to eq(%w[ok ok])
    # Both batches ran: no deduplication of batches, although every batch of two has the same
    # message_id ("batch-with-2-messages", patched on by Shoryuken's Manager).
    expect(result["batch_ids"]).to eq(["batch-with-2-messages"] * 2)
    expect(result["runs"]).to eq(2)
    expect(result).to include("batch_deletes" => 2, "batch_deleted" => 4, "deleted" => 0, "warnings" => 1)
    expect(result).to include("keys" => [], "events" => []) # the Lock stored nothing, published nothing
  end

  # auto_delete: false: the worker deletes (or not) by itself. The Lock still runs the message
  # once, and still deletes copies of a processed message itself (Shoryuken::Message#delete).
  it "with auto_delete: false, runs once, deletes nothing after the run, yet deletes later copies" do
    result = scenario(worker("Manual", "manual", "auto_delete: false, ferrolock_lock: true") + <<~RUBY)
      id = "manual-\#{SecureRandom.hex(8)}"
      C.deliver(id)
      outcome1 = R.process("manual", R.receive("manual").fetch(0))
      deletes_after_run = C.calls_to(:delete_message).size + C.calls_to(:delete_message_batch).size
      copy = C.deliver(id)
      outcome2 = R.process("manual", R.receive("manual").fetch(0))
      R.report(outcomes: [outcome1, outcome2], deletes_after_run: deletes_after_run, runs: R.runs(id),
               deleted: R.receipts(:delete_message), batch_deletes: C.calls_to(:delete_message_batch).size,
               copy: copy.receipt_handle)
    RUBY
    expect(result).to include("outcomes" => %w[ok ok], "deletes_after_run" => 0, "runs" => 1, "batch_deletes" => 0)
    expect(result["deleted"]).to eq([result["copy"]])
  end

  # ExponentialBackoffRetry wraps the Lock: the Lock sees the error first (drops the lease and
  # re-raises), then ExponentialBackoffRetry swallows it and sets the visibility timeout.
  it "with retry_intervals, drops the lock before ExponentialBackoffRetry reschedules the message" do
    options = "auto_delete: true, retry_intervals: [7], ferrolock_lock: true"
    result = scenario(worker("Retried", "retried", options, 'raise "timeout" if run == 1') + <<~RUBY)
      id = "retry-\#{SecureRandom.hex(8)}"
      first = C.deliver(id, receive_count: 1)
      outcome1 = R.process("retried", R.receive("retried").fetch(0))
      visibility = C.calls_to(:change_message_visibility)
      copy = C.deliver(id, receive_count: 2)
      outcome2 = R.process("retried", R.receive("retried").fetch(0))
      late = C.deliver(id, receive_count: 3)
      outcome3 = R.process("retried", R.receive("retried").fetch(0))
      R.report(outcomes: [outcome1, outcome2, outcome3], runs: R.runs(id), batch_deleted: R.batch_deleted,
               visibility: visibility.map { |c| [c[:receipt_handle], c[:visibility_timeout]] },
               first: first.receipt_handle, copy: copy.receipt_handle, late: late.receipt_handle,
               deleted: R.receipts(:delete_message))
    RUBY
    expect(result["outcomes"]).to eq(%w[ok ok ok]) # the retry middleware swallowed the error
    expect(result["visibility"]).to eq([[result["first"], 7]])
    expect(result["runs"]).to eq(2) # the lease was dropped: the retry ran; the copy after it did not
    expect(result["batch_deleted"]).to eq([result["copy"]])
    expect(result["deleted"]).to eq([result["late"]])
  end

  # Issue 24 item 2: AutoDelete runs inside the Lock (README placement), so a failed SQS delete
  # after a successful job counted as a failed job and the next copy charged again. And with the
  # Lock first in the chain, ExponentialBackoffRetry inside it swallowed a failure that the Lock
  # then marked processed: the retry was skipped and the job lost. The Lock now goes by the
  # worker's own perform, wherever it sits.
  it "goes by the worker's own outcome wherever the Lock sits: a failed SQS delete or a swallowed error" do
    placements = { "Readme" => "", "First" => "chain.prepend Ferrolock::Shoryuken::LockMiddleware" }
    workers = placements.keys.map do |name|
      worker("Charge#{name}", "charge_#{name.downcase}", "auto_delete: true, ferrolock_lock: true") +
        worker("Retried#{name}", "retried_#{name.downcase}",
               "auto_delete: true, retry_intervals: [7], ferrolock_lock: true", 'raise "timeout" if run == 1')
    end
    result = scenario(workers.join + <<~RUBY)
      $fail_delete = []
      class << C
        alias_method :delivered_batch, :delete_message_batch
        def delete_message_batch(params)
          queue = params[:queue_url].split("/").last
          raise Seahorse::Client::NetworkingError.new(Errno::ECONNRESET.new, "reset") if $fail_delete.delete(queue)

          delivered_batch(params)
        end
      end
      move = #{placements.to_a.inspect}.to_h
      report = move.to_h do |name, placement|
        [Object.const_get("Charge\#{name}"), Object.const_get("Retried\#{name}")].each do |klass|
          klass.server_middleware { |chain| chain.remove Ferrolock::Shoryuken::LockMiddleware; eval(placement) } unless placement.empty?
        end
        charge = "charge_\#{name.downcase}"
        retried = "retried_\#{name.downcase}"
        $fail_delete << charge
        id = "\#{name}-\#{SecureRandom.hex(4)}"
        outcomes = [1, 2].flat_map do |count|
          [[charge, "c-\#{id}"], [retried, "r-\#{id}"]].map do |queue, message|
            C.deliver(message, receive_count: count)
            [R.process(queue, R.receive(queue).fetch(0)), R.runs(message), R.state(queue, message).first]
          end
        end
        [name, { chain: Object.const_get("Charge\#{name}").server_middleware.entries.map { |e| e.klass.name.split("::").last },
                 outcomes: outcomes }]
      end
      R.report(report)
    RUBY
    expect(result.transform_values { |v| v["chain"].index("LockMiddleware") }).to eq("Readme" => 2, "First" => 0)
    placements.each_key do |name|
      charge1, retried1, charge2, retried2 = result[name]["outcomes"]
      # The job succeeded, the delete failed: processed, and the second copy deleted, not run.
      expect(charge1).to eq(["Seahorse::Client::NetworkingError", 1, "processed"]), name
      expect(charge2.last(2)).to eq([1, "processed"]), name
      expect(retried1.last).to be_nil, name # failed (swallowed by the retry middleware or not): given back
      expect(retried2).to eq(["ok", 2, "processed"]), name # its retry ran
    end
  end

  # After AutoDelete, AutoDelete would delete a copy the Lock leaves alone while the message runs
  # elsewhere: if that run then failed, nothing would be left to redeliver.
  it "refuses to run after AutoDelete for a worker with auto_delete, naming the right place" do
    workers = worker("LastDeleting", "last_deleting", "auto_delete: true, ferrolock_lock: true") +
              worker("LastKeeping", "last_keeping", "auto_delete: false, ferrolock_lock: true")
    result = scenario(workers + <<~RUBY)
      [LastDeleting, LastKeeping].each do |klass|
        klass.server_middleware { |chain| chain.remove Ferrolock::Shoryuken::LockMiddleware; chain.add Ferrolock::Shoryuken::LockMiddleware }
      end
      C.deliver("m-deleting")
      refused = R.process_error("last_deleting", R.receive("last_deleting").fetch(0))
      C.deliver("m-keeping")
      kept = R.process("last_keeping", R.receive("last_keeping").fetch(0))
      R.report(refused: refused, kept: kept, runs: [R.runs("m-deleting"), R.runs("m-keeping")],
               state: R.state("last_deleting", "m-deleting"), deleted: C.calls_to(:delete_message_batch).size)
    RUBY
    error, message = result["refused"]
    expect(error).to eq("ArgumentError")
    expect(message).to eq("Ferrolock::Shoryuken::LockMiddleware sits after AutoDelete in LastDeleting's middleware " \
                          "chain, where AutoDelete would delete copies of a message still running elsewhere; put it " \
                          "before: chain.insert_before Shoryuken::Middleware::Server::AutoDelete, " \
                          "Ferrolock::Shoryuken::LockMiddleware")
    expect(result).to include("kept" => "ok", "runs" => [0, 1], "state" => [nil, -2], "deleted" => 0)
  end

  # AutoExtendVisibility sits inside the Lock (after AutoDelete): it extends the running
  # original; a skipped copy never reaches it, so the copy's visibility is never touched.
  it "extends the running original's visibility (AutoExtendVisibility) but never a skipped copy's" do
    wait_for_extension = <<~RUBY
      if run == 1
        $entered << true
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 40
        until RealShoryuken::CLIENT.calls_to(:change_message_visibility).any? { |c| c[:receipt_handle] == sqs_msg.receipt_handle }
          raise "no visibility extension within 40 s" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
          sleep 0.05
        end
        $release.pop
      end
    RUBY
    options = "auto_delete: true, auto_visibility_timeout: true, ferrolock_lock: true"
    code = worker("Long", "long", options, wait_for_extension) + <<~RUBY
      $entered = Queue.new
      $release = Queue.new
      id = "long-\#{SecureRandom.hex(8)}"
      first = C.deliver(id)
      original = R.process_in_background("long", $entered)
      copy = C.deliver(id)
      during = R.process("long", R.receive("long").fetch(0))
      $release << true
      outcome = original.value
      R.report(outcome: outcome, during: during, runs: R.runs(id), first: first.receipt_handle,
               copy: copy.receipt_handle, extended: C.calls_to(:change_message_visibility).map { |c| c[:receipt_handle] }.uniq,
               extended_by: C.calls_to(:change_message_visibility).map { |c| c[:visibility_timeout] }.uniq,
               batch_deleted: R.batch_deleted, deleted: R.receipts(:delete_message))
    RUBY
    # VisibilityTimeout 6: Shoryuken extends every 6 - 5 = 1 s.
    result = scenario(code, env: { "FAKE_SQS_VISIBILITY" => "6" })
    expect(result).to include("outcome" => "ok", "during" => "ok", "runs" => 1, "extended_by" => [6], "deleted" => [])
    expect(result["extended"]).to eq([result["first"]])
    expect(result["batch_deleted"]).to eq([result["first"]])
  end

  # Events and log lines name the job class (from the body's "job_class"), not JobWrapper.
  it "deduplicates ActiveJob jobs sent through Shoryuken's ActiveJob adapter, naming the job class" do
    code = <<~RUBY
      require "securerandom"
      ActiveJob::Base.logger = Logger.new(nil)
      ActiveJob::Base.queue_adapter = :shoryuken
      class ChargeJob < ActiveJob::Base
        queue_as "aj"
        def perform(order) = RealShoryuken.ran(order)
      end
      ActiveJob::QueueAdapters::ShoryukenAdapter::JobWrapper.shoryuken_options ferrolock_lock: true
      order = "order-\#{SecureRandom.hex(8)}"
      ChargeJob.perform_later(order)
      original = R.receive("aj").fetch(0)
      outcome1 = R.process("aj", original)
      copy = C.deliver(original.message_id, body: original.body, message_attributes: original.message_attributes)
      outcome2 = R.process("aj", R.receive("aj").fetch(0))
      # A log line: Redis down, on_redis_error: :run.
      dead = Ferrolock::Client.new(url: ENV.fetch("DEAD_REDIS_URL"), connect_timeout: 0.2)
      Ferrolock::Shoryuken.configure { |c| c.client = dead; c.on_redis_error = :run }
      ChargeJob.perform_later("order-redis-down")
      outcome3 = R.process("aj", R.receive("aj").fetch(0))
      dead.eviction_check.join(5) # its background check: finished before this process exits
      R.report(outcomes: [outcome1, outcome2, outcome3], runs: R.runs(order), batch_deleted: R.batch_deleted,
               deleted: R.receipts(:delete_message), first: original.receipt_handle, copy: copy.receipt_handle,
               wrapper: original.message_attributes.dig("shoryuken_class", :string_value),
               workers: R.events.map { |name, payload| [name, payload[:worker]] }, log: R::FERROLOCK_LOG.string)
    RUBY
    dead_url = "redis://127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0"
    result = scenario(code, env: { "FERROLOCK_SHORYUKEN_ACTIVE_JOB" => "1", "DEAD_REDIS_URL" => dead_url })
    expect(result["wrapper"]).to eq("ActiveJob::QueueAdapters::ShoryukenAdapter::JobWrapper")
    expect(result).to include("outcomes" => %w[ok ok ok], "runs" => 1)
    expect(result["batch_deleted"].first).to eq(result["first"])
    expect(result["deleted"]).to eq([result["copy"]])
    expect(result["workers"]).to eq([%w[locked ChargeJob], %w[released ChargeJob], %w[skipped_processed ChargeJob],
                                     %w[redis_error ChargeJob]])
    expect(result["log"]).to match(/Redis unavailable, running ChargeJob message \S+ on aj: .* without deduplication/)
  end
end
