# frozen_string_literal: true

# The Shoryuken chain stand-in from the specs (the shoryuken gem is not needed by ferrolock).
require_relative "../../spec/support/shoryuken_chain"

Demo.scenario("Shoryuken Lock: duplicate SQS deliveries run once") do |report|
  Ferrolock::Shoryuken.reset!
  client = Demo.client(namespace: "demo-shoryuken-#{Process.pid}")
  chain = FerrolockTest::ShoryukenChain.build(client: client)
  runs = Hash.new(0)
  runs_lock = Mutex.new
  worker = Class.new do
    include Shoryuken::Worker
    shoryuken_options queue: "orders", auto_delete: true, ferrolock_lock: true
    define_method(:perform) do |sqs_msg, _body|
      first = runs_lock.synchronize { (runs[sqs_msg.message_id] += 1) == 1 }
      raise "flaky downstream" if first && sqs_msg.message_id.end_with?("7") # ~10% fail once

      sleep 0.002
    end
  end
  counts = Hash.new(0)
  subscription = Ferrolock.subscribe { |event, _| runs_lock.synchronize { counts[event] += 1 } }

  # 100 messages, each delivered 1-3 times; copies sit next to each other so 8 threads take
  # them at the same moment. A copy not deleted comes back (its visibility timeout passed).
  ids = Array.new(100) { |i| "order-#{i}" }
  queue = Queue.new
  ids.each { |id| rand(1..3).times { queue << id } }
  copies = queue.size
  deleted = 0
  started = Demo.monotonic
  take = lambda do
    queue.pop(true)
  rescue ThreadError
    nil # empty: a thread still working re-queues what it did not delete, and goes on
  end
  Array.new(8) do
    Thread.new do
      while (id = take.call)
        msg = FerrolockTest::FakeSqsMessage.new(message_id: id)
        begin
          FerrolockTest::ShoryukenChain.process(chain, worker.new, "orders", msg)
        rescue RuntimeError
          nil # the flaky job: Shoryuken logs it and the copy comes back
        end
        msg.deleted? ? runs_lock.synchronize { deleted += 1 } : queue << id
      end
    end
  end.each(&:join)
  ran_ok = runs.count { |id, n| n == (id.end_with?("7") ? 2 : 1) }
  report.line("deliveries (100 messages)", "#{copies} copies in #{report.ms(Demo.monotonic - started)}")
  report.line("events", counts.sort.map { |event, n| "#{event} #{n}" }.join(", "))
  report.check("every message's work completed exactly once", ran_ok == 100, "#{ran_ok}/100")
  report.check("every copy deleted (duplicates acknowledged)", deleted == copies, "#{deleted}/#{copies}")

  # A job running 3x lock_ttl: its copies arriving meanwhile are left alone, never run.
  long = Class.new do
    include Shoryuken::Worker
    shoryuken_options queue: "orders", auto_delete: true, ferrolock_lock: { lock_ttl: 0.3 }
    define_method(:perform) { |*| runs_lock.synchronize { runs["long"] += 1 } && sleep(1.0) }
  end
  original = Thread.new do
    FerrolockTest::ShoryukenChain.process(chain, long.new, "orders",
                                          FerrolockTest::FakeSqsMessage.new(message_id: "long"))
  end
  sleep 0.05
  copies = []
  until original.join(0.05)
    copies << (msg = FerrolockTest::FakeSqsMessage.new(message_id: "long"))
    FerrolockTest::ShoryukenChain.process(chain, long.new, "orders", msg)
  end
  report.check("1 s job with lock_ttl 0.3 s: #{copies.size} copies meanwhile, none ran",
               runs["long"] == 1 && copies.none?(&:deleted?))
ensure
  Ferrolock.unsubscribe(subscription) if subscription
end
