# frozen_string_literal: true

require "json"
require "open3"

module Chaos
  module GcStress
    # What one stress process came to: a crash (a fatal signal, or Ruby's [BUG] / a Rust panic
    # / a libc abort in its log, from it or from a forked child), a hang, broken promises,
    # unexpected exceptions, or nothing; printed with the evidence.
    class Verdict
      CRASH = /\[BUG\]|Segmentation fault|panicked at|double free|corrupted|malloc\(\)|free\(\): |stack smashing/
      FATAL_SIGNALS = %w[SEGV ABRT BUS ILL FPE KILL].freeze
      EXIT_MEANINGS = { 2 => "broken invariant", 3 => "hung worker", 4 => "unexpected exceptions" }.freeze
      # Lines of a crash report shown (the rest stays in the kept log).
      REPORT_LINES = 80

      attr_reader :mode

      # run: { status:, hung:, seconds: } of the process; log, results: its files.
      def initialize(mode, run, log:, results:)
        @mode = mode
        @status = run.fetch(:status)
        @hung = run.fetch(:hung)
        @seconds = run.fetch(:seconds)
        @log = File.exist?(log) ? File.read(log, mode: "rb").force_encoding(Encoding::UTF_8).scrub : ""
        @results = File.exist?(results) ? JSON.parse(File.read(results)) : nil
      end

      # Keys Redis still has without an expiry once the processes are gone: every ferrolock key
      # must expire or be deleted. nil when clean.
      def self.redis_left(port)
        keys, = Open3.capture2("redis-cli", "-p", port.to_s, "--scan")
        forever = keys.split("\n").select do |key|
          ttl, = Open3.capture2("redis-cli", "-p", port.to_s, "PTTL", key)
          ttl.strip == "-1"
        end
        puts "redis: #{keys.split("\n").size} key(s) left, #{forever.size} without an expiry"
        forever.empty? ? nil : RedisLeft.new(forever)
      rescue Errno::ENOENT
        puts "redis: redis-cli not found, keys not checked"
        nil
      end

      def ok?
        !crashed? && !@hung && @status&.success?
      end

      def crashed?
        (@status&.signaled? && FATAL_SIGNALS.include?(Signal.signame(@status.termsig))) || CRASH.match?(@log)
      end

      def summary
        what = []
        what << "a CRASH" if crashed?
        what << "a HANG (watchdog)" if @hung
        what << EXIT_MEANINGS.fetch(@status.exitstatus, "exit #{@status.exitstatus}") if @status&.exited? && !ok?
        "#{@mode}: #{what.join(", ")}"
      end

      def print
        puts "== #{@mode}: #{format("%.0f", @seconds)} s, #{status_text}"
        print_results if @results
        print_children
        print_crash if crashed? || @hung
      end

      private

      def status_text
        return "no exit status" unless @status
        return "killed by SIG#{Signal.signame(@status.termsig)}" if @status.signaled?

        "exit #{@status.exitstatus}#{" (#{EXIT_MEANINGS[@status.exitstatus]})" if EXIT_MEANINGS[@status.exitstatus]}"
      end

      def print_results
        counts = @results["counts"]
        total = counts.values.sum { |h| h.values.sum }
        puts "   #{@results["rounds"].size} rounds, #{total} operations; most holders at once: " \
             "#{@results["most_holders"]}; stale unblocking calls: #{@results["stale_unblock_calls"].inspect}"
        print_rounds
        counts.sort.each do |action, outcomes|
          puts "   #{action.ljust(26)} #{outcomes.sort.map { |o| o.join("=") }.join(" ")}"
        end
        print_findings
      end

      def print_findings
        @results["problems"].each { |p| puts "   PROBLEM: #{p}" }
        @results["unexpected"].each do |u|
          puts "   UNEXPECTED in #{u["where"]}: #{u["error"]}\n      #{u["backtrace"].first(6).join("\n      ")}"
        end
      end

      def print_rounds
        rounds = @results["rounds"]
        return if rounds.empty?

        sums = %w[raises kills compactions].to_h { |k| [k, rounds.sum { |r| r[k] }] }
        verify = rounds.map { |r| r["verify"] }
        puts "   storm: #{sums["raises"]} Thread#raise, #{sums["kills"]} Thread#kill, " \
             "#{sums["compactions"]} GC.compact; verify_compaction_references #{rounds.size} times " \
             "(longest #{verify.max} s)"
      end

      # Fork children print their stale unblocking calls (fork_hold.rb); counted here, since
      # they cannot add to the parent's tally.
      def print_children
        stale = @log.scan(/fork child \d+: (\d+) stale unblocking/).flatten.map(&:to_i)
        puts "   fork children with stale unblocking calls: #{stale.size} (#{stale.sum} calls)" unless stale.empty?
      end

      # From the first [BUG] (or crash line) on, else the log's end.
      def print_crash
        lines = @log.lines
        first = lines.index { |l| CRASH.match?(l) } || [lines.size - REPORT_LINES, 0].max
        puts "   --- log from line #{first + 1} of #{lines.size}:"
        lines[first, REPORT_LINES].each { |l| puts "   | #{l.chomp}" }
      end
    end

    # Keys left in Redis without an expiry.
    class RedisLeft
      def initialize(keys)
        @keys = keys
      end

      def ok?
        false
      end

      def summary
        "redis: #{@keys.size} key(s) without an expiry (#{@keys.first(5).join(", ")})"
      end
    end
  end
end
