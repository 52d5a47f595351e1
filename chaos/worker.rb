# frozen_string_literal: true

# One worker process of bin/chaos:
#   ruby -Ilib chaos/worker.rb URL JOURNAL DEADLINE mutex=2,limiter=2,dual=2
# runs threads of each workload until DEADLINE (CLOCK_MONOTONIC seconds), appending what
# happened to JOURNAL. The runner kill -9s some workers on purpose.
require "ferrolock"
require_relative "journal"
require_relative "settings"
require_relative "workloads/mutex_load"
require_relative "workloads/limiter_load"
require_relative "workloads/dual_lock_load"

module Chaos
  # Starts the workload threads and waits for them.
  class Worker
    WORKLOADS = {
      "mutex" => Workloads::MutexLoad, "limiter" => Workloads::LimiterLoad, "dual" => Workloads::DualLockLoad
    }.freeze

    # "mutex=2,limiter=2" -> { "mutex" => 2, "limiter" => 2 }
    def self.parse_threads(spec)
      spec.split(",").to_h do |part|
        kind, count = part.split("=")
        [kind, Integer(count)]
      end
    end

    def initialize(url:, journal:, deadline:, threads:)
      @journal = Journal.new(journal)
      @deadline = deadline
      @threads = threads
      options = { namespace: "chaos", connect_timeout: Settings::CONNECT_TIMEOUT, read_timeout: Settings::READ_TIMEOUT }
      @client = Ferrolock::Client.new(**self.class.where(url), **options)
    end

    # A Redis URL, or "sentinel:<name>:<sentinel url>,<sentinel url>,..." (bin/chaos --failover).
    def self.where(url)
      return { url: url } unless url.start_with?("sentinel:")

      _, name, sentinels = url.split(":", 3)
      { name: name, sentinels: sentinels.split(",") }
    end

    def run
      Ferrolock.configure do |config|
        config.logger = Logger.new(File::NULL)
        # bin/chaos --failover runs with and without it.
        config.min_replicas_acked = Integer(ENV.fetch("CHAOS_MIN_REPLICAS_ACKED", "0"))
      end
      # Lost leases are also seen as events (the table shows them beside the sections' outcomes).
      Ferrolock.subscribe(:lock_lost) do |_event, payload|
        @journal.write(ev: "lock_lost", prim: payload[:primitive].to_s, t: Chaos.now)
      end
      # Instrumented in the releasing thread: its workload reads the mark (Workloads::Base#release_failure).
      Ferrolock.subscribe(:release_failed) { Thread.current[:chaos_release_failed] = true }
      @journal.write(ev: "worker_start", pid: Process.pid, t: Chaos.now)
      workload_threads.each(&:join)
      @journal.write(ev: "worker_end", pid: Process.pid, t: Chaos.now)
      @journal.close
    end

    private

    def workload_threads
      index = 0
      @threads.flat_map do |kind, count|
        Array.new(count) do
          index += 1
          load = WORKLOADS.fetch(kind).new(journal: @journal, client: @client, deadline: @deadline, thread_id: index)
          Thread.new { load.run }
        end
      end
    end
  end
end

if $PROGRAM_NAME == __FILE__
  url, journal, deadline, threads = ARGV
  Chaos::Worker.new(url: url, journal: journal, deadline: Float(deadline),
                    threads: Chaos::Worker.parse_threads(threads)).run
end
