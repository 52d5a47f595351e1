# frozen_string_literal: true

# Loaded ONLY in a child process (spec/support/real_shoryuken.rb runs it): boots the vendored,
# unmodified Shoryuken 6.2.1 with a fake SQS client and ferrolock's Lock inserted exactly as the
# README says. Never required by rspec itself: Shoryuken's dependencies (Debian's aws-sdk-core...)
# are not in the Gemfile, and each scenario wants a fresh Shoryuken.
require "json"
require "logger"
require "redis"
require "stringio"

begin
  require "aws-sdk-core"
rescue LoadError => e
  puts JSON.generate("skip" => "aws-sdk-core cannot be required (#{e.message})")
  exit 0
end

# aws-sdk-sqs is not installable here; Shoryuken needs only the constant to exist.
module Aws
  module SQS
    Client = Class.new unless const_defined?(:Client, false)
  end
end

$LOAD_PATH.unshift(File.join(ENV.fetch("FERROLOCK_SHORYUKEN_DIR"), "lib"))
if ENV["FERROLOCK_SHORYUKEN_ACTIVE_JOB"]
  begin
    # Before shoryuken, which then loads its ActiveJob adapter and extensions.
    require "active_job"
  rescue LoadError => e
    puts JSON.generate("skip" => "ActiveJob cannot be required (#{e.message})")
    exit 0
  end
end
require "shoryuken"
require "ferrolock"
require_relative "fake_sqs_client"

# `Shoryuken.configure_server` yields only inside the shoryuken server (where bin/shoryuken
# defines Shoryuken::CLI); this child plays that server.
Shoryuken.const_set(:CLI, Class.new) unless defined?(Shoryuken::CLI)

module RealShoryuken
  SHORYUKEN_LOG = StringIO.new
  FERROLOCK_LOG = StringIO.new
  CLIENT = FerrolockTest::FakeSqsClient.new(visibility_timeout: Integer(ENV.fetch("FAKE_SQS_VISIBILITY", "30")))
  RUNS = Hash.new(0)
  RUNS_LOCK = Mutex.new
  EVENTS = [] # rubocop:disable Style/MutableConstant -- appended to by the subscriber below

  Shoryuken::Logging.logger = Logger.new(SHORYUKEN_LOG)
  Ferrolock.config.logger = Logger.new(FERROLOCK_LOG)
  Shoryuken.sqs_client = CLIENT
  Ferrolock.subscribe { |event, payload| RUNS_LOCK.synchronize { EVENTS << [event, payload] } }

  # The README's snippet, verbatim.
  Shoryuken.configure_server do |config|
    config.server_middleware do |chain|
      chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::Lock
    end
  end

  module_function

  def ran(key)
    RUNS_LOCK.synchronize { RUNS[key] += 1 }
  end

  def runs(key)
    RUNS_LOCK.synchronize { RUNS[key] }
  end

  # [[event, payload], ...] ferrolock published so far (spec/events_spec.rb: Ferrolock.subscribe).
  def events
    RUNS_LOCK.synchronize { EVENTS.dup }
  end

  def event_names
    events.map(&:first)
  end

  # The test Redis (REDIS_URL), to look at what the Lock stored.
  def redis
    RUNS_LOCK.synchronize { @redis ||= Redis.new(url: ENV.fetch("REDIS_URL")) }
  end

  # [value, pttl] of message `id`'s state key on `queue`.
  def state(queue, id)
    key = Ferrolock.client.key("msg:#{queue}:#{id}", "state")
    [redis.get(key), redis.pttl(key)]
  end

  # The SQS calls made on one delivery (FakeSqsClient#deliver's result), by name, in order:
  # [] when nothing touched it, ["delete_message_batch"] after AutoDelete, ["delete_message"]
  # after the Lock deleted a copy.
  def touched(delivery)
    CLIENT.calls.filter_map do |name, params|
      handles = params[:entries] ? params[:entries].map { |e| e[:receipt_handle] } : [params[:receipt_handle]]
      name.to_s if handles.include?(delivery.receipt_handle)
    end
  end

  # One poll of `queue` the way Shoryuken's fetcher does it (Shoryuken::Queue#receive_messages
  # → real Shoryuken::Message objects), then the real Processor on what came back.
  def receive(queue, count = 1)
    Shoryuken::Client.queues(queue).receive_messages(max_number_of_messages: count, attribute_names: ["All"])
  end

  # Processor.process's outcome: "ok" or the class of the error it raised.
  def process(queue, sqs_msg)
    Shoryuken::Processor.process(queue, sqs_msg)
    "ok"
  rescue StandardError => e
    warn "#{e.class}: #{e.message}\n#{e.backtrace.first(8).join("\n")}" if ENV["FERROLOCK_SHORYUKEN_DEBUG"]
    e.class.name
  end

  # Processor.process's error as [class, message], or nil when it raised none.
  def process_error(queue, sqs_msg)
    Shoryuken::Processor.process(queue, sqs_msg)
    nil
  rescue StandardError => e
    [e.class.name, e.message]
  end

  # Replaces the Lock in `worker`'s own chain (Shoryuken::Worker.server_middleware) by one built
  # with `options`, at the README's place.
  def lock_chain(worker, options)
    worker.server_middleware do |chain|
      chain.remove Ferrolock::Shoryuken::Lock
      chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::Lock, options
    end
  end

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # A batch as Shoryuken's Manager hands it to the Processor: the Array gets a singleton
  # `message_id` ("batch-with-<n>-messages", the same for every batch of that size), by the
  # Manager's own (private) patch_batch!.
  def receive_batch(queue, count = 10)
    Shoryuken::Manager.allocate.send(:patch_batch!, receive(queue, count))
  end

  # Processes the next message of `queue` in a thread and returns the thread once its job has
  # pushed to `entered` (the job's own signal). `entered` also hears of a thread that ended
  # early, so this never hangs.
  def process_in_background(queue, entered)
    thread = Thread.new do
      process(queue, receive(queue).fetch(0))
    ensure
      entered << :ended
    end
    entered.pop
    thread
  end

  # Delivers message `id` and processes the one copy received.
  def deliver_and_process(queue, id, **options)
    CLIENT.deliver(id, **options)
    process(queue, receive(queue).fetch(0))
  end

  def receipts(name)
    CLIENT.calls_to(name).map { |params| params[:receipt_handle] }
  end

  def batch_deleted
    CLIENT.calls_to(:delete_message_batch).flat_map { |params| params[:entries].map { |e| e[:receipt_handle] } }
  end

  def chain_names
    Shoryuken.server_middleware.entries.map { |entry| entry.klass.name.split("::").last }
  end

  def report(result)
    puts JSON.generate(result)
  end
end

# Short names for scenario code.
C = RealShoryuken::CLIENT
R = RealShoryuken
