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
      @client = Ferrolock::Client.new(url: url, namespace: "chaos", connect_timeout: Settings::CONNECT_TIMEOUT,
                                      read_timeout: Settings::READ_TIMEOUT)
    end

    def run
      Ferrolock.configure { |config| config.logger = Logger.new(File::NULL) }
      # Lost leases are also seen as events (the table shows them beside the sections' outcomes).
      Ferrolock.subscribe(:lock_lost) do |_event, payload|
        @journal.write(ev: "lock_lost", prim: payload[:primitive].to_s, t: Chaos.now)
      end
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
