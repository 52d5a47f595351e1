# frozen_string_literal: true

require "spec_helper"
require "logger"
require "stringio"
require_relative "support/shoryuken_chain"
require_relative "support/fake_sqs"

RSpec.describe Ferrolock::Shoryuken::Lock do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:log) { StringIO.new }
  let(:events) { Queue.new }
  let(:chain) { FerrolockTest::ShoryukenChain.build }

  before do
    Ferrolock::Shoryuken.reset!
    @previous_logger = Ferrolock.config.instance_variable_get(:@logger)
    Ferrolock.config.logger = Logger.new(log)
    @subscription = Ferrolock.subscribe { |event, payload| events << [event, payload] }
  end

  after do
    Ferrolock.unsubscribe(@subscription)
    Ferrolock.config.instance_variable_set(:@logger, @previous_logger)
    Ferrolock::Shoryuken.reset!
  end

  # A Shoryuken worker class whose perform runs the block (counting runs).
  def worker_class(**options, &block)
    Class.new do
      include Shoryuken::Worker
      shoryuken_options({ queue: "orders", auto_delete: true }.merge(options))
      define_method(:perform) { |sqs_msg, body| block ? block.call(sqs_msg, body) : :done }
    end
  end

  def message(id = "m-#{rand(1 << 32)}")
    FerrolockTest::FakeSqsMessage.new(message_id: id)
  end

  def deliver(worker, msg, via: chain, queue: "orders")
    FerrolockTest::ShoryukenChain.process(via, worker.new, queue, msg)
  end

  def event_names
    names = []
    names << events.pop.first until events.empty?
    names
  end

  def state(msg, queue: "orders")
    key = Ferrolock.client.key("msg:#{queue}:#{msg.message_id}", "state")
    [redis.get(key), redis.pttl(key)]
  end

  describe "one execution per message" do
    let(:runs) { Queue.new }
    let(:worker) { worker_class(ferrolock_lock: true) { |msg, _| runs << msg.message_id } }

    it "runs the first delivery, marks it processed for processed_ttl, and AutoDelete deletes it" do
      msg = message
      deliver(worker, msg)
      expect(runs.size).to eq(1)
      expect(msg.calls).to eq([[:delete]])
      value, ttl = state(msg)
      expect(value).to eq("processed")
      expect(ttl).to be_between(3_590_000, 3_600_000)
      expect(event_names).to eq([:locked])
    end

    it "skips a copy of a processed message and deletes it so it stops coming back" do
      original = message("m-dup")
      copy = message("m-dup")
      deliver(worker, original)
      events.clear
      deliver(worker, copy)
      expect(runs.size).to eq(1)
      expect(copy.calls).to eq([[:delete]]) # deleted once, by the lock (AutoDelete never ran)
      expect(event_names).to eq([:skipped_processed])
    end

    it "leaves a copy of a message still in progress untouched, and it runs if the original fails" do
      started = Queue.new
      release = Queue.new
      slow = worker_class(ferrolock_lock: true) do |_msg, _body|
        runs << :run
        started << true
        raise "boom" if release.pop == :fail
      end
      original = Thread.new do
        Thread.current.report_on_exception = false
        deliver(slow, message("m-busy"))
      end
      started.pop
      copy = message("m-busy")
      deliver(slow, copy)
      expect(copy.calls).to eq([]) # neither deleted nor its visibility changed
      expect(runs.size).to eq(1)

      release << :fail
      expect { original.join }.to raise_error(RuntimeError, "boom")
      expect(state(copy).first).to be_nil # released at once, not after lock_ttl

      release << :ok
      deliver(slow, copy) # the copy comes back after its visibility timeout: it is the retry
      expect(runs.size).to eq(2)
      expect(copy.calls).to eq([[:delete]])
      expect(event_names).to eq(%i[locked skipped_in_progress released_after_error locked])
    end

    it "re-raises the job's error and leaves the message on the queue" do
      failing = worker_class(ferrolock_lock: true) { raise ArgumentError, "bad payload" }
      msg = message
      expect { deliver(failing, msg) }.to raise_error(ArgumentError, "bad payload")
      expect(msg.calls).to eq([])
      expect(state(msg).first).to be_nil
      released = Array.new(events.size) { events.pop }.select { |event, _| event == :released_after_error }
      expect(released).to match([[:released_after_error,
                                  hash_including(error: "ArgumentError", message_id: msg.message_id)]])
    end

    it "releases the message when the worker thread is killed mid-job" do
      entered = Queue.new
      stuck = worker_class(ferrolock_lock: true) do
        entered << true
        sleep
      end
      msg = message
      thread = Thread.new { deliver(stuck, msg) }
      entered.pop
      expect(state(msg).first).to match(/\A\h{32}\z/)
      thread.kill.join
      expect(state(msg).first).to be_nil
    end

    it "keys messages by queue: the same id on another queue is another message" do
      deliver(worker, message("m-same"), queue: "orders")
      deliver(worker, message("m-same"), queue: "refunds")
      expect(runs.size).to eq(2)
    end

    it "keeps a copy out while a job runs 3x lock_ttl (the lease is renewed)" do
      lock_ttl = 0.4
      long = worker_class(ferrolock_lock: { lock_ttl: lock_ttl }) do
        runs << :run
        sleep lock_ttl * 3.5
      end
      original = Thread.new { deliver(long, message("m-long")) }
      wait_until { runs.size == 1 }
      copies = []
      until original.join(0.03)
        copies << (copy = message("m-long"))
        deliver(long, copy)
      end
      expect(runs.size).to eq(1)
      expect(copies.size).to be > 10
      expect(copies.map(&:calls).uniq).to eq([[]])
      late = message("m-long")
      deliver(long, late)
      expect(late.calls).to eq([[:delete]])
      expect(runs.size).to eq(1)
    end

    it "uses one shared client: no connection per message" do
      Ferrolock.client.ping
      before = redis.info("stats")["total_connections_received"].to_i
      200.times { |i| deliver(worker, message("m-conn-#{i}")) }
      after = redis.info("stats")["total_connections_received"].to_i
      expect(runs.size).to eq(200)
      expect(after - before).to be <= 2
    end
  end

  describe "opting in" do
    let(:runs) { Queue.new }

    def twice(worker, via: chain)
      2.times { deliver(worker, message("m-twice"), via: via) }
      runs.size
    end

    it "passes workers through by default" do
      expect(twice(worker_class { runs << 1 })).to eq(2)
      expect(event_names).to eq([])
    end

    it "locks every worker when enabled globally, except those that opt out" do
      Ferrolock::Shoryuken.configure { |c| c.enabled = true }
      expect(twice(worker_class { runs << 1 })).to eq(1)
      runs.clear
      expect(twice(worker_class(ferrolock_lock: false) { runs << 1 })).to eq(2)
    end

    it "takes options from the chain (a per-worker chain, for instance)" do
      locked_chain = FerrolockTest::ShoryukenChain.build(enabled: true, lock_ttl: 7)
      slow = worker_class do
        runs << 1
        redis.set("seen-ttl", state(message("m-twice")).last)
      end
      expect(twice(slow, via: locked_chain)).to eq(1)
      expect(redis.get("seen-ttl").to_i).to be_between(6_000, 7_000)
    end

    it "lets a worker's Hash override the chain and the global settings" do
      Ferrolock::Shoryuken.configure { |c| c.lock_ttl = 30 }
      slow = worker_class(ferrolock_lock: { lock_ttl: 3, processed_ttl: 5 }) do
        runs << 1
        redis.set("seen-ttl", state(message("m-twice")).last)
      end
      expect(twice(slow, via: FerrolockTest::ShoryukenChain.build(lock_ttl: 9))).to eq(1)
      expect(redis.get("seen-ttl").to_i).to be_between(2_000, 3_000)
      expect(state(message("m-twice")).last).to be_between(4_000, 5_000)
    end

    it "accepts keywords as well as the positional Hash Shoryuken's chain passes" do
      expect(described_class.new(enabled: true)).to be_a(described_class)
      expect(described_class.new({ enabled: true })).to be_a(described_class)
    end

    it "lets batch workers through untouched, with one warning" do
      batch = worker_class(batch: true, ferrolock_lock: true) { |msgs, _| runs << msgs.size }
      2.times { deliver(batch, [message("b-1"), message("b-1")]) }
      expect(runs.size).to eq(2)
      expect(log.string.scan("batch worker").size).to eq(1)
      expect(redis.keys("ferrolock:*")).to eq([])
    end
  end

  describe "bad input" do
    let(:worker) { worker_class(ferrolock_lock: true) { raise "must not run" } }

    it "rejects a message without message_id, naming it" do
      bare = Struct.new(:body).new("{}")
      expect { deliver(worker, bare) }.to raise_error(ArgumentError, /sqs_msg must respond to message_id/)
      blank = FerrolockTest::FakeSqsMessage.new(message_id: nil)
      expect { deliver(worker, blank) }.to raise_error(ArgumentError, /message_id must be a non-empty String, got nil/)
      expect(blank.calls).to eq([])
    end

    it "rejects bad chain options when the chain builds the middleware" do
      {
        { lock_ttl: 0 } => [ArgumentError, /lock_ttl must be positive/],
        { processed_ttl: -1 } => [ArgumentError, /processed_ttl must be positive/],
        { lock_ttl: "60" } => [TypeError, /lock_ttl must be a number of seconds/],
        { on_redis_error: :ignore } => [ArgumentError, /on_redis_error must be :raise or :run/],
        { enabled: "yes" } => [TypeError, /enabled must be true or false/],
        { client: "redis://x" } => [TypeError, /client must be a Ferrolock::Client/],
        { lock_tll: 5 } => [ArgumentError, /unknown option :lock_tll/]
      }.each do |options, (error, text)|
        expect { deliver(worker, message, via: FerrolockTest::ShoryukenChain.build(options)) }
          .to raise_error(error, text), options.inspect
      end
      expect { described_class.new("yes") }.to raise_error(TypeError, /options must be a Hash/)
    end

    it "rejects bad global settings and bad worker options" do
      expect { Ferrolock::Shoryuken.configure { |c| c.lock_ttl = 0 } }.to raise_error(ArgumentError, /lock_ttl/)
      expect { Ferrolock::Shoryuken.configure { |c| c.on_redis_error = :drop } }
        .to raise_error(ArgumentError, /on_redis_error/)
      expect(Ferrolock::Shoryuken.defaults[:lock_ttl]).to eq(60)
      expect { deliver(worker_class(ferrolock_lock: "yes"), message) }
        .to raise_error(TypeError, /ferrolock_lock must be true, false or a Hash/)
      expect { deliver(worker_class(ferrolock_lock: { lock_ttl: -5 }), message) }
        .to raise_error(ArgumentError, /lock_ttl must be positive/)
    end

    it "never requires the shoryuken gem nor defines ::Shoryuken" do
      out = run_ruby!(<<~RUBY)
        require "ferrolock"
        print defined?(::Shoryuken).inspect, " ", $LOADED_FEATURES.grep(%r{/shoryuken}).reject { |f| f.include?("ferrolock") }.inspect
      RUBY
      expect(out).to eq("nil []")
    end
  end

  describe "when Redis is unreachable" do
    let(:dead) do
      Ferrolock::Client.new(url: "redis://127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0", connect_timeout: 0.2)
    end
    let(:runs) { Queue.new }
    let(:worker) { worker_class(ferrolock_lock: true) { runs << 1 } }

    it "raises by default: the job does not run and the message is not deleted (it comes back)" do
      msg = message
      via = FerrolockTest::ShoryukenChain.build(client: dead)
      expect { deliver(worker, msg, via: via) }.to raise_error(Ferrolock::ConnectionError)
      expect(runs.size).to eq(0)
      expect(msg.calls).to eq([])
      expect(log.string).to include("left on the queue for redelivery")
    end

    it "runs without deduplication with on_redis_error: :run, and says so" do
      msg = message
      via = FerrolockTest::ShoryukenChain.build(client: dead, on_redis_error: :run)
      deliver(worker, msg, via: via)
      expect(runs.size).to eq(1)
      expect(msg.calls).to eq([[:delete]])
      expect(log.string).to include("without deduplication")
      expect(event_names).to eq([:redis_error])
    end
  end

  describe "crashes and processes" do
    def spawn_ruby(code, log_path)
      env = { "REDIS_URL" => FerrolockTest.redis_server.url }
      Process.spawn(env, RbConfig.ruby, "-I", FerrolockTest::LIB, "-e", code,
                    chdir: FerrolockTest::ROOT, pgroup: true, out: log_path, err: %i[child out])
    end

    it "runs the redelivery of a message whose worker was killed with -9 once lock_ttl passed" do
      log_path = File.join(Dir.mktmpdir("ferrolock-kill-"), "worker.log")
      pid = spawn_ruby(<<~RUBY, log_path)
        require "redis"
        require "ferrolock"
        require "./spec/support/shoryuken_chain"
        worker = Class.new do
          include Shoryuken::Worker
          shoryuken_options auto_delete: true, ferrolock_lock: { lock_ttl: 1.5 }
          def perform(*) = (Redis.new(url: ENV["REDIS_URL"]).set("started", Process.pid) && sleep)
        end
        msg = FerrolockTest::FakeSqsMessage.new(message_id: "m-kill")
        FerrolockTest::ShoryukenChain.process(FerrolockTest::ShoryukenChain.build, worker.new, "orders", msg)
      RUBY
      begin
        wait_until(timeout: 20) do
          redis.get("started") || (Process.wait(pid, Process::WNOHANG) && raise("worker died: #{File.read(log_path)}"))
        end
        sleep 0.8 # past a renewal: the lease lives on renewals, not on its first TTL
        Process.kill("KILL", -pid)
      ensure
        Process.wait(pid)
      end
      killed = monotonic
      runs = Queue.new
      worker = worker_class(ferrolock_lock: { lock_ttl: 1.5 }) { runs << monotonic }
      skipped = 0
      while runs.empty?
        raise "the redelivery never ran" if monotonic - killed > 10

        copy = message("m-kill")
        deliver(worker, copy)
        skipped += 1 if copy.calls.empty?
        sleep 0.05
      end
      waited = runs.pop - killed
      expect(skipped).to be >= 5 # copies received right after the crash were left alone
      expect(waited).to be_between(0.5, 1.5 + 2.0)
    end

    it "runs each of 500 messages exactly once: 3 processes x 4 threads, 1-3 copies each, 5% failing first" do
      rng = Random.new(Kernel.rand(1 << 30))
      ids = Array.new(500) { |i| "msg-#{i}" }
      failing = ids.sample(25, random: rng)
      deliveries = []
      ids.shuffle(random: rng).each do |id|
        copies = Array.new(rng.rand(1..3)) { |c| FerrolockTest::FakeSqs::Delivery.new(id, c.to_s) }
        # Half the duplicated messages have their copies back to back: received concurrently.
        if rng.rand < 0.5
          deliveries.concat(copies)
        else
          copies.each { |copy| deliveries.insert(rng.rand(deliveries.size + 1), copy) }
        end
      end
      sqs = FerrolockTest::FakeSqs.new(url: FerrolockTest.redis_server.url)
      redis.sadd("work:failing", failing)
      sqs.send_copies(deliveries)

      worker_process = <<~RUBY
        require "ferrolock"
        require "./spec/support/shoryuken_chain"
        require "./spec/support/fake_sqs"
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
        Ferrolock.subscribe do |event, _|
          (Thread.current[:redis] ||= Redis.new(url: ENV["REDIS_URL"])).incr("events:\#{event}")
        end
        chain = FerrolockTest::ShoryukenChain.build
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 90
        Array.new(4) do
          Thread.new do
            FerrolockTest::FakeSqs.new(url: ENV["REDIS_URL"]).work(chain, OrdersWorker, queue: "orders", deadline: deadline)
          end
        end.each(&:join)
      RUBY
      3.times.map { Thread.new { run_ruby!(worker_process, timeout: 120) } }.each(&:join)

      done = redis.mget(ids.map { |id| "work:done:#{id}" }).map(&:to_i)
      attempts = redis.mget(ids.map { |id| "work:attempts:#{id}" }).map(&:to_i)
      count = ->(event) { redis.get("events:#{event}").to_i }
      expect(done.each_with_index.reject { |n, _| n == 1 }).to eq([]) # [runs, index] of any message not run once
      expect(sqs.deleted_count).to eq(deliveries.size)
      expect(sqs.double_deletes).to eq(0)
      failing_attempts = ids.zip(attempts).select { |id, _| failing.include?(id) }.map(&:last)
      expect(failing_attempts).to all(eq(2))
      expect(count[:released_after_error]).to eq(25)
      expect(count[:locked]).to eq(525)
      expect(count[:skipped_processed]).to eq(deliveries.size - 500) # every other copy acknowledged
      expect(count[:skipped_in_progress]).to be > 0 # some copies did arrive concurrently
    end
  end
end
