# frozen_string_literal: true

# bin/chaos --gc: hunts memory-safety crashes in the native extension. A stress process
# (chaos/gc_stress/harness.rb) runs rounds of threads over DistMutex, ConcurrentLimiter,
# DualLock, RateLimiter and plain client calls, with GC.auto_compact, a GC.compact thread, a
# Thread#raise / Thread#kill / Timeout storm and forks inside held sections, checking each
# primitive's promise as it goes and GC.verify_compaction_references after each round; then a
# GC.stress pass over the DistMutex and rate-limiter basics. Each process is watched from here,
# so a crash, a hang or a broken promise is reported, with the [BUG] report when there is one.
#
#   ruby -Ilib chaos/gc_stress.rb [--seconds N] [--seed S] [--keep]
#     --seconds N  the whole run (default 120): 4/5 compaction rounds, 1/5 GC.stress
#     --seed S     the random seed (printed each run, so a failing run can be repeated)
#     --only MODE  one phase only: compact (all N seconds of rounds) or stress (all N seconds of GC.stress);
#                  control: the compact rounds over Ruby's Mutex, Timeout, pipes and forks, no ferrolock
#                  call (when a crash turns up: does Ruby crash without the extension?)
#     --keep       keep the logs (their directory is printed); a failing run always keeps them
# Exit status: 0 when nothing was found, 1 otherwise.
require "digest"
require "fileutils"
require "json"
require "optparse"
require "rbconfig"
require "tmpdir"
require_relative "../demo/throwaway_redis"
require_relative "gc_stress/verdict"

module Chaos
  module GcStress
    # Starts Redis, runs the two stress processes under a watchdog, judges them, cleans up.
    class Supervisor
      HARNESS = File.join(__dir__, "gc_stress", "harness.rb")
      LIB = File.expand_path("../lib", __dir__)
      # Seconds a stress process may run past its budget before it counts as hung (a round's
      # end plus its workers' longest wait, a fork child's, verify_compaction_references).
      GRACE = 90
      # Where a failing run's logs are kept: the repo's tmp/ (ignored by git), not /tmp.
      KEEP_DIR = File.expand_path("../tmp/gc_stress", __dir__)

      # Share of the run each phase gets.
      SHARES = { "compact" => 0.8, "stress" => 0.2 }.freeze
      # --only control: the compaction rounds with no ferrolock call (is a crash Ruby's own?).
      MODES = SHARES.keys + ["control"]

      # The command line's options (see the top of this file).
      def self.parse(argv)
        options = { seconds: 120, seed: Random.new_seed % (1 << 32), keep: false }
        OptionParser.new do |o|
          o.on("--seconds N", Integer) { |n| options[:seconds] = n }
          o.on("--seed S", Integer) { |n| options[:seed] = n }
          o.on("--only MODE", MODES) { |mode| options[:only] = mode }
          o.on("--keep") { options[:keep] = true }
        end.parse!(argv.dup)
        abort "gc_stress: --seconds must be at least 10" if options[:seconds] < 10
        options
      rescue OptionParser::ParseError => e
        abort "gc_stress: #{e.message} (see chaos/gc_stress.rb)"
      end

      def initialize(seconds:, seed:, keep:, only: nil)
        @seconds = seconds
        @shares = only ? { only => 1.0 } : SHARES
        @seed = seed
        @keep = keep
        @dir = Dir.mktmpdir("ferrolock-gcstress-")
        @redis = Demo::ThrowawayRedis.new(prefix: "ferrolock-gcstress-redis-")
      end

      def run
        puts "gc_stress: #{RUBY_DESCRIPTION}; seed #{@seed}; #{@seconds} s; extension #{extension}"
        @redis.start
        verdicts = @shares.map { |mode, share| phase(mode, (@seconds * share).round) }
        verdicts << Verdict.redis_left(@redis.port)
        conclude(verdicts.flatten.compact)
      ensure
        @redis.stop
        keep_or_remove
      end

      private

      # The library this Ruby loads, and when it was built (others may rebuild it meanwhile).
      def extension
        path = File.join(LIB, "ferrolock", RUBY_VERSION[/\A\d+\.\d+/], "ferrolock.#{RbConfig::CONFIG["DLEXT"]}")
        return "(none)" unless File.exist?(path)

        "#{path.delete_prefix("#{File.dirname(LIB)}/")} (built #{File.mtime(path).utc}, " \
          "sha256 #{Digest::SHA256.file(path).hexdigest[0, 12]})"
      end

      # Runs one stress process and returns its Verdict.
      def phase(mode, seconds)
        log = File.join(@dir, "#{mode}.log")
        results = File.join(@dir, "#{mode}.json")
        started = now
        pid = Process.spawn(RbConfig.ruby, "-I", LIB, HARNESS, mode, @redis.url, seconds.to_s, results,
                            @seed.to_s, out: log, err: %i[child out])
        status, hung = watch(pid, started + seconds + GRACE)
        verdict = Verdict.new(mode, { status: status, hung: hung, seconds: now - started }, log: log, results: results)
        verdict.print
        verdict
      end

      # Waits for the process; past `deadline` asks it for a thread dump (SIGUSR1), then for
      # Ruby's [BUG] report with the C backtrace (SIGSEGV), then kills it. [status, hung?]
      def watch(pid, deadline)
        loop do
          _, status = Process.waitpid2(pid, Process::WNOHANG)
          return [status, false] if status
          break if now > deadline

          sleep 0.2
        end
        [end_hung(pid), true]
      end

      def end_hung(pid)
        [["USR1", 3], ["SEGV", 5], ["KILL", 0]].each do |signal, wait|
          Process.kill(signal, pid)
          waited = now + wait
          sleep 0.1 while now < waited && !Process.waitpid(pid, Process::WNOHANG)
        rescue Errno::ESRCH, Errno::ECHILD
          break
        end
        Process.waitpid2(pid)[1]
      rescue Errno::ECHILD
        nil
      end

      def conclude(verdicts)
        failed = verdicts.reject(&:ok?)
        @keep ||= !failed.empty?
        if failed.empty?
          puts "gc_stress: nothing found (seed #{@seed})"
          return true
        end

        puts "gc_stress: FOUND #{failed.map(&:summary).join("; ")} (seed #{@seed})"
        false
      end

      def keep_or_remove
        if @keep
          FileUtils.mkdir_p(KEEP_DIR)
          kept = File.join(KEEP_DIR, "#{Time.now.utc.strftime("%Y%m%dT%H%M%S")}-#{RUBY_VERSION}-#{@seed}")
          FileUtils.mv(@dir, kept)
          puts "gc_stress: logs kept in #{kept}"
        else
          FileUtils.rm_rf(@dir)
        end
      end

      def now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end

if $PROGRAM_NAME == __FILE__
  options = Chaos::GcStress::Supervisor.parse(ARGV)
  exit(Chaos::GcStress::Supervisor.new(**options).run ? 0 : 1)
end
