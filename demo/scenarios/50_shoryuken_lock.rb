# frozen_string_literal: true

# The real, unmodified Shoryuken 6.2.1 (vendored) when it loads; else the spec's chain stand-in.
require_relative "../real_shoryuken"
require_relative "../../spec/support/shoryuken_chain" if Demo::RealShoryuken.missing

module ShoryukenDemo
  # Workers on a lock-protected queue: `include Shoryuken::Worker`, auto_delete, ferrolock_lock.
  def self.worker(queue, lock_option, &perform)
    Class.new do
      include Shoryuken::Worker
      shoryuken_options queue: queue, auto_delete: true, ferrolock_lock: lock_option
      define_method(:perform, &perform)
    end
  end

  # Real Shoryuken: SQS (the fake client) holds the deliveries; Shoryuken::Queue#receive_messages
  # turns them into real Shoryuken::Messages; Shoryuken::Processor.process runs the worker
  # registered for the queue through Shoryuken's default server chain, with the Lock inserted
  # before AutoDelete (per worker here, to use the demo's namespaced client).
  class RealDriver
    def initialize(client)
      @client = client
    end

    def title
      "real Shoryuken #{Shoryuken::VERSION} (Processor + default chain; fake SQS client)"
    end

    def worker(queue, lock_option, &perform)
      client = @client
      ShoryukenDemo.worker(queue, lock_option, &perform).tap do |klass|
        klass.server_middleware do |chain|
          chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::LockMiddleware,
                              client: client
        end
      end
    end

    def deliver(_queue, id, receive_count: 1)
      Demo::RealShoryuken.sqs.deliver(id, receive_count: receive_count)
    end

    # One received message, or nil when SQS has none visible.
    def take(queue)
      Shoryuken::Client.queues(queue).receive_messages(max_number_of_messages: 1, attribute_names: ["All"]).first
    end

    def process(queue, _worker, msg)
      Shoryuken::Processor.process(queue, msg)
    end

    def deleted?(msg)
      Demo::RealShoryuken.deleted_receipts.include?(msg.receipt_handle)
    end
  end

  # Stand-in (spec/support/shoryuken_chain.rb): Lock before AutoDelete in a chain written from
  # Shoryuken's documented behaviour, with message objects that record their deletes.
  class StandInDriver
    def initialize(client)
      @chain = FerrolockTest::ShoryukenChain.build(client: client)
      @inbox = Hash.new { |hash, queue| hash[queue] = Queue.new }
    end

    def title
      "Shoryuken stand-in: #{Demo::RealShoryuken.missing}"
    end

    def worker(queue, lock_option, &perform)
      ShoryukenDemo.worker(queue, lock_option, &perform)
    end

    def deliver(queue, id, receive_count: 1)
      @inbox[queue] << [id, receive_count]
    end

    def take(queue)
      id, = @inbox[queue].pop(true)
      FerrolockTest::FakeSqsMessage.new(message_id: id)
    rescue ThreadError
      nil
    end

    def process(queue, worker, msg)
      FerrolockTest::ShoryukenChain.process(@chain, worker.new, queue, msg)
    end

    def deleted?(msg)
      msg.deleted?
    end
  end

  def self.driver(client)
    Demo::RealShoryuken.missing ? StandInDriver.new(client) : RealDriver.new(client)
  end
end

Demo.scenario("Shoryuken Lock: duplicate SQS deliveries run once") do |report|
  Ferrolock::Shoryuken.reset!
  sqs = ShoryukenDemo.driver(Demo.client(namespace: "demo-shoryuken-#{Process.pid}"))
  report.line("running in", sqs.title)
  runs = Hash.new(0)
  runs_lock = Mutex.new
  worker = sqs.worker("orders", true) do |sqs_msg, _body|
    first = runs_lock.synchronize { (runs[sqs_msg.message_id] += 1) == 1 }
    raise "flaky downstream" if first && sqs_msg.message_id.end_with?("7") # ~10% fail once

    sleep 0.002
  end
  counts = Hash.new(0)
  subscription = Ferrolock.subscribe { |event, _| runs_lock.synchronize { counts[event] += 1 } }

  # 100 messages, each delivered 1-3 times; copies sit next to each other so 8 threads take
  # them at the same moment. A copy not deleted comes back (its visibility timeout passed):
  # the thread that took it delivers it again before taking the next, so none is lost.
  copies = 0
  100.times do |i|
    rand(1..3).times do
      sqs.deliver("orders", "order-#{i}")
      copies += 1
    end
  end
  deleted = 0
  started = Demo.monotonic
  Array.new(8) do
    Thread.new do
      while (msg = sqs.take("orders"))
        begin
          sqs.process("orders", worker, msg)
        rescue RuntimeError
          nil # the flaky job: Shoryuken logs it and the copy comes back
        end
        next sqs.deliver("orders", msg.message_id, receive_count: 2) unless sqs.deleted?(msg)

        runs_lock.synchronize { deleted += 1 }
      end
    end
  end.each(&:join)
  ran_ok = runs.count { |id, n| n == (id.end_with?("7") ? 2 : 1) }
  report.line("deliveries (100 messages)", "#{copies} copies in #{report.ms(Demo.monotonic - started)}")
  report.line("events", counts.sort.map { |event, n| "#{event} #{n}" }.join(", "))
  report.check("every message's work completed exactly once", ran_ok == 100, "#{ran_ok}/100")
  report.check("every copy deleted (duplicates acknowledged)", deleted == copies, "#{deleted}/#{copies}")

  # A job running 3x its lease: its copies arriving meanwhile are left alone, never run.
  long = sqs.worker("reports", { lease: 0.3 }) { |*| runs_lock.synchronize { runs["long"] += 1 } && sleep(1.0) }
  sqs.deliver("reports", "long")
  first = sqs.take("reports")
  original = Thread.new { sqs.process("reports", long, first) }
  sleep 0.05
  left = []
  until original.join(0.05)
    sqs.deliver("reports", "long", receive_count: 2)
    left << (msg = sqs.take("reports"))
    sqs.process("reports", long, msg)
  end
  report.check("1 s job with lease 0.3 s: #{left.size} copies meanwhile, none ran",
               runs["long"] == 1 && left.none? { |copy| sqs.deleted?(copy) })
ensure
  Ferrolock.unsubscribe(subscription) if subscription
end
