# frozen_string_literal: true

require "spec_helper"
require "tmpdir"
require_relative "support/real_shoryuken"
require_relative "support/fake_sqs_shared_client"

# Ferrolock::Shoryuken::Lock's options, failures, crashes and concurrency, inside the REAL
# Shoryuken 6.2.1 (vendored, unmodified): Shoryuken::Processor.process, the default server chain
# with the Lock inserted as the README says (or a worker's own chain), real Shoryuken::Message
# objects, workers with `include Shoryuken::Worker`. Only SQS is fake. Every scenario runs in a
# child process (spec/support/real_shoryuken.rb); spec/shoryuken_real_spec.rb has the chain's
# everyday behaviour (copies, batches, auto_delete: false, retries, ActiveJob).
RSpec.describe Ferrolock::Shoryuken::Lock do
  include FerrolockTest::RealShoryuken::Examples

  let(:redis) { FerrolockTest.redis_server.redis }
  let(:dead_url) { "redis://127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0" }

  after { Ferrolock::Shoryuken.reset! } # the examples that configure in this process

  describe "one execution per message" do
    it "leaves a copy alone while the original runs, and runs it when the original fails" do
      hold = "if run == 1 then $entered << true; raise 'boom' if $release.pop == :fail end"
      result = scenario(worker("Slow", "slow", "auto_delete: true, ferrolock_lock: true", hold) + <<~RUBY)
        $entered = Queue.new
        $release = Queue.new
        id = "busy-\#{SecureRandom.hex(8)}"
        C.deliver(id)
        original = R.process_in_background("slow", $entered)
        copy = C.deliver(id)
        during = R.process("slow", R.receive("slow").fetch(0))
        touched_during = R.touched(copy)
        $release << :fail
        original_outcome = original.value
        state = R.state("slow", id)
        back = C.deliver(id) # the copy, back after its visibility timeout: it is the retry
        retried = R.process("slow", R.receive("slow").fetch(0))
        R.report(during: during, touched_during: touched_during, original: original_outcome, state: state,
                 retried: retried, runs: R.runs(id), touched_back: R.touched(back), events: R.event_names)
      RUBY
      expect(result).to include("during" => "ok", "touched_during" => [], # neither deleted nor its visibility changed
                                "original" => "RuntimeError", "retried" => "ok", "runs" => 2,
                                "touched_back" => ["delete_message_batch"])
      expect(result["state"]).to eq([nil, -2]) # released at once, not after lock_ttl
      expect(result["events"]).to eq(%w[locked skipped_in_progress released_after_error locked released])
    end

    it "releases the message when the worker thread is killed mid-job" do
      stuck = worker("Stuck", "stuck", "auto_delete: true, ferrolock_lock: true", "$entered << true; sleep")
      result = scenario(stuck + <<~RUBY)
        $entered = Queue.new
        id = "kill-\#{SecureRandom.hex(8)}"
        delivery = C.deliver(id)
        thread = R.process_in_background("stuck", $entered)
        during = R.state("stuck", id).first
        thread.kill.join
        R.report(during: during, after: R.state("stuck", id), touched: R.touched(delivery))
      RUBY
      expect(result["during"]).to match(/\A\h{32}~/) # the in-progress lease (token + holder)
      expect(result).to include("after" => [nil, -2], "touched" => [])
    end

    it "keys messages by queue: the same id on another queue is another message" do
      code = worker("Orders", "orders", "auto_delete: true, ferrolock_lock: true") +
             worker("Refunds", "refunds", "auto_delete: true, ferrolock_lock: true") + <<~RUBY
               outcomes = %w[orders refunds].map { |queue| R.deliver_and_process(queue, "m-same") }
               R.report(outcomes: outcomes, runs: R.runs("m-same"), events: R.event_names)
             RUBY
      result = scenario(code)
      expect(result).to include("outcomes" => %w[ok ok], "runs" => 2, "events" => %w[locked released locked released])
    end

    it "keeps copies out while a job runs 3.5x lock_ttl (the lease is renewed)" do
      options = "auto_delete: true, ferrolock_lock: { lock_ttl: 0.4 }"
      body = "if run == 1 then $entered << true; sleep 1.4; $performed = true end"
      result = scenario(worker("Long", "long", options, body) + <<~RUBY)
        $entered = Queue.new
        id = "long-\#{SecureRandom.hex(8)}"
        C.deliver(id)
        original = R.process_in_background("long", $entered)
        copies = []
        until original.join(0.03)
          copy = C.deliver(id)
          R.process("long", R.receive("long").fetch(0))
          # Only a copy processed wholly before the original's perform returned must be left alone:
          # one processed as the original finishes may find it done and be deleted, as `late` is.
          copies << copy unless $performed
        end
        late = C.deliver(id)
        R.process("long", R.receive("long").fetch(0))
        R.report(outcome: original.value, runs: R.runs(id), copies: copies.size,
                 touched: copies.flat_map { |copy| R.touched(copy) }, late: R.touched(late))
      RUBY
      expect(result).to include("outcome" => "ok", "runs" => 1, "touched" => [], "late" => ["delete_message"])
      expect(result["copies"]).to be > 10
    end

    it "uses one shared client: no connection per message" do
      result = scenario(worker("Many", "many", "auto_delete: true, ferrolock_lock: true") + <<~RUBY)
        Ferrolock.client.ping
        connections = -> { R.redis.info("stats")["total_connections_received"].to_i }
        before = connections.call
        outcomes = Array.new(200) { |i| R.deliver_and_process("many", "m-conn-\#{i}") }
        R.report(outcomes: outcomes.uniq, runs: Array.new(200) { |i| R.runs("m-conn-\#{i}") }.sum,
                 connections: connections.call - before)
      RUBY
      expect(result).to include("outcomes" => ["ok"], "runs" => 200)
      expect(result["connections"]).to be <= 2
    end
  end

  describe "opting in" do
    it "passes workers through by default" do
      result = scenario(worker("Plain", "plain", "auto_delete: true") + <<~RUBY)
        2.times { R.deliver_and_process("plain", "m-twice") }
        R.report(runs: R.runs("m-twice"), events: R.events)
      RUBY
      expect(result).to include("runs" => 2, "events" => [])
    end

    it "locks every worker when enabled globally, except those that opt out" do
      code = worker("Plain", "plain", "auto_delete: true") +
             worker("OptOut", "opt-out", "auto_delete: true, ferrolock_lock: false") + <<~RUBY
               Ferrolock::Shoryuken.configure { |c| c.enabled = true }
               2.times { R.deliver_and_process("plain", "m-plain") }
               2.times { R.deliver_and_process("opt-out", "m-opt-out") }
               R.report(plain: R.runs("m-plain"), opt_out: R.runs("m-opt-out"))
             RUBY
      expect(scenario(code)).to include("plain" => 1, "opt_out" => 2)
    end

    it "takes options from the chain (a worker's own server_middleware chain)" do
      seen = "$seen_ttl = R.state('chained', sqs_msg.message_id).last"
      result = scenario(worker("Chained", "chained", "auto_delete: true", seen) + <<~RUBY)
        R.lock_chain(Chained, enabled: true, lock_ttl: 7)
        2.times { R.deliver_and_process("chained", "m-twice") }
        R.report(runs: R.runs("m-twice"), seen_ttl: $seen_ttl,
                 chain: Chained.server_middleware.entries.map { |e| e.klass.name.split("::").last })
      RUBY
      expect(result["runs"]).to eq(1)
      expect(result["seen_ttl"]).to be_between(6_000, 7_000)
      expect(result["chain"]).to eq(%w[Timing ExponentialBackoffRetry LockMiddleware AutoDelete AutoExtendVisibility])
    end

    it "lets a worker's Hash override the chain and the global settings" do
      seen = "$seen_ttl = R.state('own', sqs_msg.message_id).last"
      options = "auto_delete: true, ferrolock_lock: { lock_ttl: 3, processed_ttl: 5 }"
      result = scenario(worker("Own", "own", options, seen) + <<~RUBY)
        Ferrolock::Shoryuken.configure { |c| c.lock_ttl = 30 }
        R.lock_chain(Own, lock_ttl: 9)
        2.times { R.deliver_and_process("own", "m-twice") }
        R.report(runs: R.runs("m-twice"), seen_ttl: $seen_ttl, processed_ttl: R.state("own", "m-twice").last)
      RUBY
      expect(result["runs"]).to eq(1)
      expect(result["seen_ttl"]).to be_between(2_000, 3_000)
      expect(result["processed_ttl"]).to be_between(4_000, 5_000)
    end

    # Shoryuken's chain passes `chain.add Lock, lock_ttl: 7` as one positional Hash (the chain
    # examples above); plain keywords work too.
    it "accepts keywords as well as a positional Hash, and nothing else" do
      expect(described_class.new(enabled: true)).to be_a(described_class)
      expect(described_class.new({ enabled: true })).to be_a(described_class)
      expect { described_class.new("yes") }.to raise_error(TypeError, /options must be a Hash/)
    end
  end

  describe "bad input" do
    it "rejects a message without message_id, naming it, and runs nothing" do
      guarded = worker("Guarded", "guarded", "auto_delete: true, ferrolock_lock: true", 'raise "must not run"')
      result = scenario(guarded + <<~RUBY)
        blank = C.deliver(nil)
        blank_error = R.process_error("guarded", R.receive("guarded").fetch(0))
        # Processor.process itself needs message_id: only a chain called directly meets this one.
        bare = Struct.new(:body).new("{}")
        bare_error = begin
          Guarded.server_middleware.invoke(Guarded.new, "guarded", bare, "{}") { raise "must not run" }
          nil
        rescue StandardError => e
          [e.class.name, e.message]
        end
        R.report(blank: blank_error, bare: bare_error, touched: R.touched(blank))
      RUBY
      expect(result["blank"]).to match(["ArgumentError", /message_id must be a non-empty String, got nil/])
      expect(result["bare"]).to match(["ArgumentError", /sqs_msg must respond to message_id/])
      expect(result["touched"]).to eq([])
    end

    it "rejects bad chain options when the chain builds the middleware" do
      expected = [
        ["ArgumentError", /lock_ttl must be positive/],
        ["ArgumentError", /processed_ttl must be positive/],
        ["TypeError", /lock_ttl must be a number of seconds/],
        ["ArgumentError", /on_redis_error must be :raise or :run/],
        ["TypeError", /enabled must be true or false/],
        ["TypeError", /client must be a Ferrolock::Client/],
        ["ArgumentError", /unknown option :lock_tll/]
      ]
      result = scenario(<<~RUBY)
        cases = [{ lock_ttl: 0 }, { processed_ttl: -1 }, { lock_ttl: "60" }, { on_redis_error: :ignore },
                 { enabled: "yes" }, { client: "redis://x" }, { lock_tll: 5 }]
        errors = cases.each_with_index.map do |options, i|
          klass = Object.const_set("Bad\#{i}", Class.new { include Shoryuken::Worker; def perform(*) = raise("must not run") })
          klass.shoryuken_options queue: "bad-\#{i}", auto_delete: true
          R.lock_chain(klass, options)
          C.deliver("m-bad-\#{i}")
          [options.inspect, *R.process_error("bad-\#{i}", R.receive("bad-\#{i}").fetch(0))]
        end
        R.report(errors: errors)
      RUBY
      expect(result["errors"].size).to eq(expected.size)
      result["errors"].zip(expected).each do |(options, error, message), (want_error, want_message)|
        expect([error, message]).to match([want_error, want_message]), options
      end
    end

    it "rejects bad global settings at once, and bad worker options when the message comes" do
      expect { Ferrolock::Shoryuken.configure { |c| c.lock_ttl = 0 } }.to raise_error(ArgumentError, /lock_ttl/)
      expect { Ferrolock::Shoryuken.configure { |c| c.on_redis_error = :drop } }
        .to raise_error(ArgumentError, /on_redis_error/)
      expect(Ferrolock::Shoryuken.defaults[:lease]).to eq(60)

      refuse = 'raise "must not run"'
      code = worker("Typo", "typo", 'auto_delete: true, ferrolock_lock: "yes"', refuse) +
             worker("Negative", "negative", "auto_delete: true, ferrolock_lock: { lock_ttl: -5 }", refuse) +
             <<~RUBY
               errors = %w[typo negative].map { |queue| C.deliver("m-\#{queue}"); R.process_error(queue, R.receive(queue).fetch(0)) }
               R.report(errors: errors)
             RUBY
      typo, negative = scenario(code)["errors"]
      expect(typo).to match(["TypeError", /ferrolock_lock must be true, false or a Hash/])
      expect(negative).to match(["ArgumentError", /lock_ttl must be positive/])
    end

    it "never requires the shoryuken gem nor defines ::Shoryuken" do
      out = run_ruby!(<<~RUBY)
        require "ferrolock"
        print defined?(::Shoryuken).inspect, " ", $LOADED_FEATURES.grep(%r{/shoryuken}).reject { |f| f.include?("ferrolock") }.inspect
      RUBY
      expect(out).to eq("nil []")
    end
  end

  describe "idempotency_key" do
    it "keys the lock on a message attribute or a proc's value: two messages of one job run once" do
      opts = "auto_delete: true, body_parser: :json, ferrolock_lock: { idempotency_key: 'JobKey' }"
      by_proc = "auto_delete: true, body_parser: :json, " \
                "ferrolock_lock: { idempotency_key: ->(_msg, body) { body['order'] } }"
      result = scenario(worker("Keyed", "keyed", opts) + worker("ByProc", "byproc", by_proc) + <<~RUBY)
        key = { "JobKey" => { string_value: "order-7", data_type: "String" } }
        a = C.deliver("m1", body: '{"order":"o-1"}', message_attributes: key)
        first = R.process("keyed", R.receive("keyed").fetch(0))
        b = C.deliver("m2", body: '{"order":"o-1"}', message_attributes: key) # the producer's retry
        second = R.process("keyed", R.receive("keyed").fetch(0))
        C.deliver("m3", body: '{"order":"o-1"}') # no attribute: keyed on its message id
        third = R.process("keyed", R.receive("keyed").fetch(0))
        C.deliver("p1", body: '{"order":"o-9"}')
        R.process("byproc", R.receive("byproc").fetch(0))
        C.deliver("p2", body: '{"order":"o-9"}')
        R.process("byproc", R.receive("byproc").fetch(0))
        C.deliver("p3", body: '{"order":"o-10"}')
        R.process("byproc", R.receive("byproc").fetch(0))
        R.report(outcomes: [first, second, third], runs: %w[m1 m2 m3 p1 p2 p3].map { |id| R.runs(id) },
                 state: R.state("keyed", "key:order-7").first, deleted: R.receipts(:delete_message),
                 second: b.receipt_handle)
      RUBY
      expect(result["outcomes"]).to eq(%w[ok ok ok])
      expect(result["runs"]).to eq([1, 0, 1, 1, 0, 1])
      expect(result["state"]).to eq("processed")
      expect(result["deleted"]).to include(result["second"]) # the retry's message is deleted, not run
    end

    it "refuses at configuration time what is neither a proc nor an attribute name, naming the option" do
      expect { Ferrolock::Shoryuken::LockMiddleware.new(idempotency_key: 42) }
        .to raise_error(TypeError, /idempotency_key must be a Proc .* or a message attribute's name/)
      expect { Ferrolock::Shoryuken.configure { |c| c.idempotency_key = :job_key } }
        .to raise_error(TypeError, /idempotency_key/)
      expect { Ferrolock::Shoryuken::LockMiddleware.new(idempotency_key: "no spaces") }
        .to raise_error(ArgumentError, /idempotency_key: "no spaces" is not an SQS message attribute name/)
      expect { Ferrolock::Shoryuken::LockMiddleware.new(idempotency_key: ->(msg) { msg }) }
        .to raise_error(ArgumentError, /idempotency_key: a Proc taking 1 argument/)
      expect { Ferrolock::Shoryuken::Options.from_worker(idempotency_key: []) }
        .to raise_error(TypeError, /idempotency_key/)
      expect(Ferrolock::Shoryuken::LockMiddleware.new(idempotency_key: proc { |_m, body|
                                                                         body
                                                                       })).to be_a(described_class)
    end

    it "locks long keys and keys with braces on their SHA-256" do
      ids = ["order-1", "a{b}", "x" * 300].map { |key| Ferrolock::Shoryuken::IdempotencyKey.lock_id(key) }
      expect(ids[0]).to eq("key:order-1")
      expect(ids[1..]).to all(match(/\Akey-sha256:\h{64}\z/))
    end
  end

  describe "when Redis is unreachable" do
    # A worker whose chain's Lock uses a client on a port nobody listens on.
    def down_scenario(lock_options)
      code = worker("Down", "down", "auto_delete: true, ferrolock_lock: true") + <<~RUBY
        dead = Ferrolock::Client.new(url: ENV.fetch("DEAD_REDIS_URL"), connect_timeout: 0.2)
        R.lock_chain(Down, { client: dead }.merge(#{lock_options}))
        delivery = C.deliver("m-down")
        outcome = R.process("down", R.receive("down").fetch(0))
        dead.eviction_check.join(5) # its background check: finished before this process exits
        R.report(outcome: outcome, runs: R.runs("m-down"), touched: R.touched(delivery),
                 log: R::FERROLOCK_LOG.string, events: R.event_names)
      RUBY
      scenario(code, env: { "DEAD_REDIS_URL" => dead_url })
    end

    it "raises by default: the job does not run and the message is not deleted (it comes back)" do
      result = down_scenario("{}")
      expect(result).to include("outcome" => "Ferrolock::ConnectionError", "runs" => 0, "touched" => [],
                                "events" => ["redis_error"])
      expect(result["log"]).to include("left on the queue for redelivery")
    end

    it "runs without deduplication with on_redis_error: :run, and says so" do
      result = down_scenario("{ on_redis_error: :run }")
      expect(result).to include("outcome" => "ok", "runs" => 1, "touched" => ["delete_message_batch"],
                                "events" => ["redis_error"])
      expect(result["log"]).to include("Down message m-down on down").and include("without deduplication")
    end
  end

  describe "crashes and processes" do
    # Raises (or skips, when it could not load Shoryuken's dependencies) once the victim ended.
    def victim_ended(pid, log_path)
      return false unless Process.wait(pid, Process::WNOHANG)

      log = File.read(log_path)
      skip(JSON.parse(log.lines.last)["skip"]) if log.include?('{"skip"')
      raise "victim died: #{log}"
    end

    def kill_group(pid)
      Process.kill("KILL", -pid)
    rescue Errno::ESRCH
      nil
    ensure
      begin
        Process.wait(pid)
      rescue Errno::ECHILD
        nil
      end
    end

    it "runs the redelivery of a message whose worker was killed with -9 once lock_ttl passed" do
      skip_without_real_shoryuken
      options = "auto_delete: true, ferrolock_lock: { lock_ttl: 1.5 }"
      victim = worker("Victim", "orders", options, 'R.redis.set("started", Process.pid); sleep') + <<~RUBY
        C.deliver("m-kill")
        R.process("orders", R.receive("orders").fetch(0))
      RUBY
      # Boots before the kill, then delivers copies of the message until one runs.
      survivor = worker("Survivor", "orders", options, "$ran_at ||= R.monotonic") + <<~RUBY
        killed_at = Float(R.redis.blpop("killed-at", timeout: 60).fetch(1))
        skipped = 0
        while R.runs("m-kill").zero?
          raise "the redelivery never ran" if R.monotonic - killed_at > 10

          copy = C.deliver("m-kill")
          R.process("orders", R.receive("orders").fetch(0))
          skipped += 1 if R.runs("m-kill").zero? && R.touched(copy).empty?
          sleep 0.05
        end
        R.report(skipped: skipped, waited: $ran_at - killed_at)
      RUBY
      log_dir = Dir.mktmpdir("ferrolock-kill-")
      log_path = File.join(log_dir, "worker.log")
      pid = FerrolockTest::RealShoryuken.spawn(victim, log_path: log_path)
      survivor_thread = scenario_thread(survivor, timeout: 90)
      begin
        wait_until(timeout: 30) { redis.get("started") || victim_ended(pid, log_path) }
        sleep 0.8 # past a renewal: the lease lives on renewals, not on its first TTL
      ensure
        kill_group(pid)
        FileUtils.rm_rf(log_dir)
        # CLOCK_MONOTONIC is the machine's: the survivor compares it with its own. Sent on failure
        # too, so the survivor ends.
        redis.rpush("killed-at", monotonic.to_s)
      end
      result = survivor_thread.value
      expect(result["skipped"]).to be >= 5 # copies received right after the crash were left alone
      expect(result["waited"]).to be_between(0.5, 1.5 + 2.0)
    end

    it "runs each of 500 messages exactly once: 3 processes x 4 threads, 1-3 copies each, 5% failing first" do
      skip_without_real_shoryuken
      rng = Random.new(Kernel.rand(1 << 30))
      ids = Array.new(500) { |i| "msg-#{i}" }
      failing = ids.sample(25, random: rng)
      copies = []
      ids.shuffle(random: rng).each do |id|
        these = Array.new(rng.rand(1..3)) { |c| "#{id}|#{c}" }
        # Half the duplicated messages have their copies back to back: received concurrently.
        if rng.rand < 0.5
          copies.concat(these)
        else
          these.each { |copy| copies.insert(rng.rand(copies.size + 1), copy) }
        end
      end
      sqs = FerrolockTest::SharedFakeSqsClient.new(url: FerrolockTest.redis_server.url)
      redis.sadd("work:failing", failing)
      sqs.send_copies(copies)

      worker_process = <<~RUBY
        require "./spec/support/fake_sqs_shared_client"
        SQS = FerrolockTest::SharedFakeSqsClient.new(url: ENV.fetch("REDIS_URL"))
        Shoryuken::Client.sqs = SQS
        class OrdersWorker
          include Shoryuken::Worker
          shoryuken_options queue: "orders", auto_delete: true, ferrolock_lock: { lock_ttl: 2 }
          def perform(sqs_msg, _body)
            redis = (Thread.current[:redis] ||= Redis.new(url: ENV["REDIS_URL"]))
            id = sqs_msg.message_id
            attempt = redis.incr("work:attempts:\#{id}")
            raise "flaky first attempt" if attempt == 1 && redis.sismember("work:failing", id)
            sleep(rand * 0.004)
            redis.incr("work:done:\#{id}")
          end
        end
        deadline = R.monotonic + 90
        Array.new(4) do
          Thread.new do
            until SQS.all_deleted?
              raise "fake SQS: copies left at the deadline" if R.monotonic > deadline

              message = R.receive("orders").first
              message ? R.process("orders", message) : sleep(0.005)
            end
          end
        end.each(&:join)
        R.report(events: R.event_names.tally)
      RUBY
      results = Array.new(3) { scenario_thread(worker_process, timeout: 120) }.map(&:value)

      done = redis.mget(ids.map { |id| "work:done:#{id}" }).map(&:to_i)
      attempts = redis.mget(ids.map { |id| "work:attempts:#{id}" }).map(&:to_i)
      count = ->(event) { results.sum { |result| result["events"].fetch(event, 0) } }
      expect(done.each_with_index.reject { |n, _| n == 1 }).to eq([]) # [runs, index] of any message not run once
      expect(sqs.deleted_count).to eq(copies.size)
      expect(sqs.double_deletes).to eq(0)
      failing_attempts = ids.zip(attempts).select { |id, _| failing.include?(id) }.map(&:last)
      expect(failing_attempts).to all(eq(2))
      expect(count["released_after_error"]).to eq(25)
      expect(count["locked"]).to eq(525)
      # Every other copy was acknowledged by the Lock; a delete with an outdated receipt handle
      # (its copy had become visible again meanwhile) left the copy to be deleted once more.
      expect(count["skipped_processed"]).to eq(copies.size - 500 + sqs.stale_deletes)
      expect(count["skipped_in_progress"]).to be > 0 # some copies did arrive concurrently
    end
  end
end
