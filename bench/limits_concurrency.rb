# frozen_string_literal: true

require "active_job"
require "logger"

# limits_concurrency (Ferrolock::ActiveJob::Concurrency): what it adds to a job's enqueue and perform,
# against the same job class without limits; and how soon a blocked job starts once a slot frees (the
# release promotes it, its adapter queues it, a worker performs it). Adapters here are in-process
# stand-ins (a Ruby Queue), so the numbers are ferrolock's cost, not a queue's.
module LimitsConcurrencyBench
  # Keeps each enqueued payload for the caller to run.
  class ListAdapter
    attr_reader :queue

    def initialize
      @queue = Thread::Queue.new
    end

    def enqueue(job) = @queue << job.serialize

    def enqueue_at(job, _timestamp) = enqueue(job)
  end

  # The jobs: limited (a limit never reached: the cost of taking and giving back a slot) and plain.
  class Plain < ActiveJob::Base
    include Ferrolock::ActiveJob::Concurrency

    def perform(_key) = nil
  end

  # Two slots per key: never reached in the overhead runs (one key per job).
  class Limited < Plain
    limits_concurrency to: 2, key: ->(key) { key }, duration: 60
  end

  # One at a time on one key: every job but the first is blocked, then promoted.
  class Serial < Plain
    limits_concurrency to: 1, key: "serial", duration: 60

    # When each run started and ended (Bench.monotonic), in the order they did.
    STARTS = Thread::Queue.new
    ENDS = Thread::Queue.new

    def perform(_key)
      STARTS << Bench.monotonic
      sleep 0.001
      ENDS << Bench.monotonic
    end
  end

  module_function

  # Jobs/s for enqueue alone, and for enqueue + perform (the payload run as a worker runs it).
  def rates(klass, count)
    adapter = ListAdapter.new
    klass.queue_adapter = adapter
    warm = 100
    warm.times { |i| klass.perform_later("warm-#{i}") }
    warm.times { ActiveJob::Base.execute(adapter.queue.pop) }
    started = Bench.monotonic
    count.times { |i| klass.perform_later("k#{i}") }
    enqueue = count / (Bench.monotonic - started)
    started = Bench.monotonic
    count.times { ActiveJob::Base.execute(adapter.queue.pop) }
    perform = count / (Bench.monotonic - started)
    [enqueue, perform]
  end

  # Seconds from a job's end (the last line of its perform) to the next blocked job's start, with
  # `workers` threads taking jobs off the adapter's queue.
  def latencies(count, workers: 2)
    adapter = ListAdapter.new
    Serial.queue_adapter = adapter
    Serial::STARTS.clear
    Serial::ENDS.clear
    count.times { |i| Serial.perform_later(i) }
    threads = Array.new(workers) do
      Thread.new do
        while (payload = adapter.queue.pop)
          ActiveJob::Base.execute(payload)
        end
      end
    end
    sleep 0.01 until Serial::ENDS.size >= count
    adapter.queue.close
    threads.each(&:join)
    starts = Array.new(Serial::STARTS.size) { Serial::STARTS.pop }.sort
    ends = Array.new(Serial::ENDS.size) { Serial::ENDS.pop }.sort
    starts.drop(1).zip(ends).map { |start, finish| start - finish }.sort
  end
end

Bench.define("limits_concurrency") do
  ActiveJob::Base.logger = Logger.new(nil)
  Ferrolock.config.logger = Logger.new(nil)
  count = 2_000
  plain = LimitsConcurrencyBench.rates(LimitsConcurrencyBench::Plain, count)
  limited = LimitsConcurrencyBench.rates(LimitsConcurrencyBench::Limited, count)
  table = Bench::Table.new("ActiveJob, 1 thread", ours: "limits_concurrency", baseline: "no limits")
  table.add("perform_later", ours: limited[0], baseline: plain[0])
  table.add("perform (ActiveJob::Base.execute)", ours: limited[1], baseline: plain[1])
  overhead = [0, 1].map { |i| ((1.0 / limited[i]) - (1.0 / plain[i])) * 1e6 }
  gaps = LimitsConcurrencyBench.latencies(500)
  ms = ->(pct) { format("%.2f ms", Bench.percentile(gaps, pct) * 1000) }
  <<~TEXT
    #{table}

    - added per job: #{overhead[0].round} µs at enqueue (one script), #{overhead[1].round} µs at perform (the
      slot confirmed with a fencing token, renewed, released: two scripts)
    - blocked -> started (to: 1, 500 jobs, 2 worker threads; from a job's last line to the next one's first:
      release + promotion in one script, the adapter's enqueue, the worker's admission): p50 #{ms.call(0.5)},
      p99 #{ms.call(0.99)}
  TEXT
end
