# frozen_string_literal: true

# bin/chaos: worker processes of threads hammer DistMutex, ConcurrentLimiter and DualLock on one
# throwaway Redis while faults are injected, then the histories are checked; then the after-work
# cases run (a fork inside a held block, Redis failing right after a block: chaos/after_work.rb).
#   bin/chaos            about 3 minutes, every fault kind several times
#   bin/chaos --short    about 40 s, every fault kind once
#   bin/chaos --keep     keep the journals (their directory is printed)
#   bin/chaos --failover DistMutex through primary kills under Sentinel (chaos/failover.rb)
require "fileutils"
require "ferrolock"
require_relative "journal"
require_relative "settings"
require_relative "redis_node"
require_relative "worker_pool"
require_relative "faults"
require_relative "checker"
require_relative "report"
require_relative "after_work"

module Chaos
  # Runs one chaos session and exits non-zero on any unexplained violation.
  class Runner
    PLANS = {
      full: { seconds: 180, workers: 4, gap: 5.0, cycles: nil },
      short: { seconds: 32, workers: 3, gap: 3.0, cycles: 1 }
    }.freeze
    THREADS = "mutex=2,limiter=2,dual=2"
    WARMUP = 3.0
    COOLDOWN = 4.0
    # How long after the deadline a worker may take to finish its last DualLock job (every
    # attempt waiting its longest, then a retry pause) and a long section, before it counts as hung.
    GRACE = (Settings::JOB_ATTEMPTS * (Settings::MAX_WAIT + Settings::WAIT_TOLERANCE + Settings::RETRY_AFTER)) +
            (Settings::LEASE * 2.2) + 10

    def initialize(plan, keep:)
      @plan = plan
      @keep = keep
      @redis = RedisNode.new
      @dir = Dir.mktmpdir("ferrolock-chaos-journals-")
      @faults = []
    end

    def run
      @redis.start
      started = Chaos.now
      deadline = started + @plan[:seconds]
      pool = WorkerPool.new(dir: @dir, url: @redis.url, deadline: deadline, threads: THREADS)
      pool.spawn_workers(@plan[:workers])
      inject_faults(Faults.new(redis: @redis, pool: pool), deadline)
      hung = pool.wait_all(grace: GRACE)
      summary(started, pool)
      after_work = AfterWork.run(@redis, short: @plan[:cycles] == 1)
      check(pool, hung, after_work)
    ensure
      @redis.stop
      keep_or_remove
    end

    private

    def inject_faults(faults, deadline)
      sleep WARMUP
      kinds = @plan[:cycles] ? Faults::KINDS * @plan[:cycles] : Faults::KINDS.cycle
      kinds.each do |kind|
        break if Chaos.now > deadline - COOLDOWN - Faults::STOP_SECONDS

        @faults << faults.inject(kind)
        $stdout.puts "fault: #{kind}" if ENV["CHAOS_VERBOSE"]
        sleep @plan[:gap]
      end
    end

    # --keep: the journals and the faults (faults.json) stay for a closer look.
    def keep_or_remove
      return FileUtils.rm_rf(@dir) unless @keep

      File.write(File.join(@dir, "faults.json"), JSON.pretty_generate(@faults))
      puts "journals kept in #{@dir}"
    end

    def summary(started, pool)
      unfair = ", DistMutex and limiter fair: false" if ENV["FERROLOCK_CHAOS_FAIR"] == "false"
      puts "ran #{format("%.0f", Chaos.now - started)} s: #{@plan[:workers]} worker processes " \
           "(#{THREADS} threads each; #{pool.journals.size - @plan[:workers]} replacements), " \
           "lease #{Settings::LEASE} s#{unfair}"
    end

    # after_work: the after-work cases' failures (chaos/after_work.rb).
    def check(pool, hung, after_work)
      kills = @faults.select { |f| f[:kind] == :kill_holder }.to_h { |f| [f[:pid], f[:start]] }
      checker = Checker.new(History.new(pool.journals, kills), @faults)
      failures = Report.new(checker, hung: hung, failed: pool.failed).print + after_work
      if failures.empty?
        puts "\nbin/chaos: every promise held"
        true
      else
        puts "\nbin/chaos: #{failures.size} check(s) failed: #{failures.join("; ")}"
        false
      end
    end
  end
end

if $PROGRAM_NAME == __FILE__
  plan = ARGV.include?("--short") ? :short : :full
  keep = ARGV.include?("--keep")
  if ARGV.include?("--failover")
    require_relative "failover"
    as_primary = ARGV.include?("--restart-as-primary")
    failover = Chaos::Failover.new(Chaos::Failover::PLANS.fetch(plan), keep: keep, restart_as_primary: as_primary)
    exit(failover.run ? 0 : 1)
  end
  ok = Chaos::Runner.new(Chaos::Runner::PLANS.fetch(plan), keep: keep).run
  exit(ok ? 0 : 1)
end
