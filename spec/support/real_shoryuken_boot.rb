# frozen_string_literal: true

# Loaded ONLY in a child process (spec/support/real_shoryuken.rb runs it): boots the vendored,
# unmodified Shoryuken 6.2.1 with a fake SQS client and ferrolock's Lock inserted exactly as the
# README says. Never required by rspec itself: the real Shoryuken would clash with the stand-in
# `Shoryuken` module of spec/support/shoryuken_chain.rb.
require "json"
require "logger"
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

  Shoryuken::Logging.logger = Logger.new(SHORYUKEN_LOG)
  Ferrolock.config.logger = Logger.new(FERROLOCK_LOG)
  Shoryuken.sqs_client = CLIENT

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

  # A batch as Shoryuken's Manager hands it to the Processor: the Array gets a singleton
  # `message_id` ("batch-with-<n>-messages", the same for every batch of that size), by the
  # Manager's own (private) patch_batch!.
  def receive_batch(queue, count = 10)
    Shoryuken::Manager.allocate.send(:patch_batch!, receive(queue, count))
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
