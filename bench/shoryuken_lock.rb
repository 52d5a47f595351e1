# frozen_string_literal: true

require "redis"
# The real, unmodified Shoryuken 6.2.1 (vendored) when it loads; else the spec's chain stand-in.
require_relative "../demo/real_shoryuken"
require_relative "../spec/support/shoryuken_chain" if Demo::RealShoryuken.missing

# Messages/s through Shoryuken: the real Shoryuken::Processor.process with its default server
# chain (Timing, ExponentialBackoffRetry, <lock>, AutoDelete, AutoExtendVisibility; a new
# middleware instance per message), a no-op worker and a fake SQS client; with
# Ferrolock::Shoryuken::Lock and with the original middleware it replaces: SET NX EX 60 /
# SET "processed" EX 60 through a NEW redis-rb connection per message. Also: the chain without
# any lock, and what each costs in Redis commands and connections per message. Without the real
# Shoryuken: the spec's stand-in chain (Lock before AutoDelete) instead.
module ShoryukenLockBench
  # The original middleware, as described in SPEC.md §5 (baseline).
  class OriginalLock
    def call(_worker, queue, sqs_msg, _body)
      redis = Redis.new(url: Bench.redis_url)
      key = "shoryuken:lock:#{queue}:#{sqs_msg.message_id}"
      return unless redis.set(key, "1", nx: true, ex: 60)

      begin
        yield
      rescue StandardError
        redis.del(key)
        raise
      end
      redis.set(key, "processed", ex: 60)
    ensure
      redis&.close
    end
  end

  # The real Shoryuken: one worker class per queue, its own chain (Shoryuken's default one, per
  # worker) with `lock` inserted before AutoDelete; each message a real Shoryuken::Message (as the
  # fetcher builds them) run by Shoryuken::Processor.process. AutoDelete's batch delete goes to
  # the fake SQS client.
  class RealChain
    def self.title
      "the real Shoryuken #{Shoryuken::VERSION} (Processor + default server chain, fake SQS client)"
    end

    def initialize(lock, *args)
      @queue = "bench-#{lock ? lock.name.split("::").last.downcase : "none"}"
      worker = Class.new do
        include Shoryuken::Worker
        def perform(_sqs_msg, _body) = nil
      end
      worker.shoryuken_options queue: @queue, auto_delete: true, ferrolock_lock: true
      return unless lock

      worker.server_middleware { |chain| chain.insert_before Shoryuken::Middleware::Server::AutoDelete, lock, *args }
    end

    def process(id)
      data = FerrolockTest::FakeSqsClient::MessageData.new(message_id: id, receipt_handle: "rh-#{id}", body: "{}",
                                                           attributes: {}, message_attributes: {})
      Shoryuken::Processor.process(@queue, Demo::RealShoryuken.message(@queue, data))
    end
  end

  # The spec's stand-in chain: AutoDelete, `lock` before it, a no-op worker.
  class StandInChain
    # A no-op worker that opts in to the lock.
    class Worker
      include Shoryuken::Worker
      shoryuken_options queue: "bench", auto_delete: true, ferrolock_lock: true

      def perform(_sqs_msg, _body) = nil
    end

    # A message whose delete does nothing (deleting is SQS's cost, the same for every chain).
    Message = Struct.new(:message_id) do
      def delete = true
    end

    def self.title
      "the spec's Shoryuken chain stand-in (#{Demo::RealShoryuken.missing})"
    end

    def initialize(lock, *args)
      @chain = Shoryuken::Middleware::Chain.new do |chain|
        chain.add Shoryuken::Middleware::Server::AutoDelete
        chain.insert_before Shoryuken::Middleware::Server::AutoDelete, lock, *args if lock
      end
    end

    def process(id)
      @chain.invoke(Worker.new, "bench", Message.new(id), "{}") { nil }
    end
  end

  module_function

  def chain(lock, *args)
    (Demo::RealShoryuken.missing ? StandInChain : RealChain).new(lock, *args)
  end

  def title
    (Demo::RealShoryuken.missing ? StandInChain : RealChain).title
  end

  def throughput(chain, ops:, threads:)
    counter = 0
    ids = Mutex.new
    Bench.ops_per_second(ops: ops, threads: threads) do
      id = ids.synchronize { counter += 1 }
      chain.process("#{chain.object_id}-#{id}")
    end
  end

  # [round trips, new connections] per message, from the server's own counters: round trips
  # are the calls of the commands the chain sends itself (commands run inside a Lua script are
  # counted separately by Redis and are not round trips).
  def cost(chain, redis, sent:, messages: 500)
    before = counters(redis, sent)
    messages.times { |i| chain.process("cost-#{chain.object_id}-#{i}") }
    after = counters(redis, sent)
    after.zip(before).map { |a, b| (a - b) / messages.to_f }
  end

  def counters(redis, sent)
    stats = redis.info("commandstats")
    calls = sent.sum { |name| stats.dig(name, "calls").to_i }
    [calls, redis.info("stats")["total_connections_received"].to_i]
  end
end

Bench.define("shoryuken_lock") do
  client = Ferrolock::Client.new(url: Bench.redis_url)
  ours = ShoryukenLockBench.chain(Ferrolock::Shoryuken::Lock, client: client)
  original = ShoryukenLockBench.chain(ShoryukenLockBench::OriginalLock)
  bare = ShoryukenLockBench.chain(nil)
  table = Bench::Table.new("unique messages, threads", baseline: "original (conn/msg)")
  notes = []
  [[1, 3_000], [8, 6_000]].each do |threads, ops|
    with = ShoryukenLockBench.throughput(ours, ops: ops, threads: threads)
    without = ShoryukenLockBench.throughput(original, ops: ops, threads: threads)
    table.add(threads.to_s, ours: with, baseline: without)
    none = ShoryukenLockBench.throughput(bare, ops: ops, threads: threads)
    notes << format("- %d thread(s), the same chain without any lock: %d msg/s", threads, none.round)
  end
  redis = Redis.new(url: Bench.redis_url)
  { "ferrolock" => [ours, %w[evalsha eval]], "original" => [original, %w[set del]] }.each do |name, (chain, sent)|
    trips, connections = ShoryukenLockBench.cost(chain, redis, sent: sent)
    notes << format("- %s: %.2f round trips and %.2f new connections per message", name, trips, connections)
  end
  "Through #{ShoryukenLockBench.title}.\n\n#{table}\n\n#{notes.join("\n")}"
end
