# frozen_string_literal: true

# bin/chaos --failover: worker processes hold DistMutex sections through a Sentinel-managed
# primary + 1 replica (3 sentinels) while the primary is killed (kill -9) every few seconds,
# the replica promoted and the dead one restarted as a replica of it; once with
# min_replicas_acked 0 and once with 1. Prints one table for both and fails on an unexplained
# overlap, a fencing token that did not grow, an undocumented error or a hung worker.
#   bin/chaos --failover           about 2 minutes (the two passes run side by side)
#   bin/chaos --failover --short   about 20 s (the bin/test chaos step)
#   --restart-as-primary           the dead primary comes back with its old configuration, as a
#                                  primary, until Sentinel demotes it (a split brain of seconds:
#                                  reported, not failed, without min_replicas_acked)
require "fileutils"
require "tmpdir"
require "ferrolock"
require_relative "journal"
require_relative "settings"
require_relative "history"
require_relative "checker"
require_relative "worker_pool"
require_relative "failover_report"
# The specs' Sentinel setup (primary, replica, 3 sentinels on loopback; redis-rb for admin).
require_relative "../spec/support/redis_sentinel"

# bin/chaos --failover (see chaos/run.rb for the plain fault suite).
module Chaos
  # Sentinel waits 2 x failover-timeout before it fails the same primary over again; the specs'
  # 10 s would make every second kill wait 20 s. 3 s is plenty for one replica on loopback.
  module QuickFailoverRetry
    private

    def config_text
      super.sub(/failover-timeout (\S+) \d+/, "failover-timeout \\1 3000")
    end
  end
  FerrolockTest::RedisSentinel::Sentinel.prepend(QuickFailoverRetry)

  # Runs the two passes and prints their table; `run` answers whether every check held.
  class Failover
    PLANS = {
      full: { seconds: 90, workers: 3, kill_every: 8.0 },
      short: { seconds: 10, workers: 2, kill_every: 10.0 }
    }.freeze
    THREADS = "mutex=4"
    WARMUP = 3.0
    # A worker finishes its last lock wait and a long section well within this after the deadline.
    GRACE = Settings::LOCK_TIMEOUT + Settings::WAIT_TOLERANCE + (Settings::LEASE * 2.2) + 20

    # One pass: its min_replicas_acked, the kills ({ kind:, start:, end: }), the failovers Sentinel
    # made (more than the kills when a loaded machine made it miss a live primary's down-after) and
    # what the workers did.
    Pass = Struct.new(:acks, :kills, :failovers, :checker, :hung, :failed, keyword_init: true)

    def initialize(plan, keep:, restart_as_primary: false)
      @plan = plan
      @keep = keep
      @restart_as_primary = restart_as_primary
    end

    def run
      # Side by side, each on its own Sentinel setup: half the wall time, the same load for both.
      passes = [0, 1].map { |acks| Thread.new { run_pass(acks) } }.map(&:value)
      failures = FailoverReport.new(passes, split_brain_expected: @restart_as_primary).print
      if failures.empty?
        puts "\nbin/chaos --failover: every check held"
        true
      else
        puts "\nbin/chaos --failover: #{failures.size} check(s) failed: #{failures.join("; ")}"
        false
      end
    end

    private

    def run_pass(acks)
      dir = Dir.mktmpdir("ferrolock-failover-#{acks}-")
      sentinel = FerrolockTest::RedisSentinel.new.start
      pool, kills, hung = run_workers(sentinel, dir, acks)
      Pass.new(acks: acks, kills: kills, failovers: sentinel.primary_switches,
               checker: Checker.new(History.new(pool.journals, {}), kills), hung: hung, failed: pool.failed)
    ensure
      sentinel&.destroy
      @keep ? puts("journals of min_replicas_acked #{acks} kept in #{dir}") : FileUtils.rm_rf(dir)
    end

    def run_workers(sentinel, dir, acks)
      deadline = Chaos.now + @plan[:seconds]
      where = "sentinel:#{FerrolockTest::RedisSentinel::NAME}:#{sentinel.urls.join(",")}"
      # The workers read it in Worker#run.
      pool = WorkerPool.new(dir: dir, url: where, deadline: deadline, threads: THREADS,
                            env: { "CHAOS_MIN_REPLICAS_ACKED" => acks.to_s })
      pool.spawn_workers(@plan[:workers])
      kills = kill_primaries(sentinel, deadline, acks)
      [pool, kills, pool.wait_all(grace: GRACE)]
    end

    # kill -9 of the primary every kill_every seconds; each returns once Sentinel promoted the
    # replica and the dead primary rejoined as a replica (a few seconds).
    def kill_primaries(sentinel, deadline, acks)
      sleep WARMUP
      kills = []
      while Chaos.now < deadline - WARMUP
        started = Chaos.now
        @restart_as_primary ? sentinel.kill_primary : kill_primary(sentinel)
        kills << { kind: :kill_primary, start: started, end: Chaos.now }
        took = format("%.1f", Chaos.now - started)
        $stdout.puts "kill_primary (min_replicas_acked #{acks}): back in #{took} s" if ENV["CHAOS_VERBOSE"]
        sleep [@plan[:kill_every] - (Chaos.now - started), 0.5].max
      end
      kills
    end

    # kill -9 of the primary; once Sentinel promoted the replica, the dead one starts again on its
    # port as a replica of the new primary (as a supervisor that follows Sentinel would start it).
    def kill_primary(sentinel)
      old = sentinel.primary
      Process.kill("KILL", old.pid)
      old.destroy
      wait_for { promoted?(sentinel, old) }
      fresh = FerrolockTest::RedisServer.new(port: old.port,
                                             extra_args: ["--replicaof", "127.0.0.1", sentinel.primary.port.to_s])
      sentinel.servers[sentinel.servers.index(old)] = fresh
      fresh.start
      # Sentinel may fail over again meanwhile (a loaded VM misses its 1 s down-after): wait for
      # any healthy state, a primary and a synced replica.
      wait_for { healthy?(sentinel) }
    end

    def healthy?(sentinel)
      primary = sentinel.primary
      primary.redis.call("ROLE").first == "master" &&
        (sentinel.servers - [primary]).all? do |r|
          r.redis.call("INFO", "replication").include?("master_link_status:up")
        end
    rescue StandardError
      false
    end

    def promoted?(sentinel, old)
      primary = sentinel.primary
      primary != old && primary.redis.call("ROLE").first == "master"
    rescue StandardError
      false
    end

    def wait_for(timeout: 60)
      limit = Chaos.now + timeout
      until yield
        raise "bin/chaos --failover: the Sentinel setup did not recover within #{timeout} s" if Chaos.now > limit

        sleep 0.1
      end
    end
  end
end
