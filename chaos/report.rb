# frozen_string_literal: true

require_relative "settings"

module Chaos
  # Prints the run's table (Markdown, so it can go into the README) and says what failed.
  class Report
    def initialize(checker, hung:, failed:)
      @checker = checker
      @history = checker.history
      @hung = hung
      @failed = failed
      @failures = []
    end

    # Prints everything; returns the list of unexplained violations (empty: the run passed).
    def print
      puts "| check | result |", "|---|---|"
      faults_row
      sections_row
      mutex_rows
      limiter_rows
      dual_rows
      wait_rows
      recovery_row
      other_rows
      unexplained_details
      @failures
    end

    private

    def row(check, result, failed: false)
      puts "| #{check} | #{result}#{" **FAIL**" if failed} |"
      @failures << check if failed
    end

    def faults_row
      tally = @checker.faults.map { |f| f[:kind] }.tally
      row("faults injected", tally.map { |kind, n| "#{kind} #{n}" }.join(", "))
      kills = @checker.faults.select { |f| f[:kind] == :kill_holder }
      row("kill -9 while holding", "#{kills.count { |f| f[:held].any? }}/#{kills.size} kills, " \
                                   "#{kills.sum { |f| f[:held].size }} sections cut")
    end

    # A run with no sections of a primitive checked nothing: that fails too.
    def sections_row
      counts = %w[mutex limiter dual].to_h { |prim| [prim, @history.sections_of(prim).map(&:outcome).tally] }
      row("sections (lost / Redis unreachable at release / cut by kill -9)",
          counts.map { |prim, t| "#{prim} #{t.values.sum} (#{%w[lost conn killed].map { t[_1].to_i }.join(" / ")})" }
                .join(", "),
          failed: counts.values.any?(&:empty?))
      row(":lock_lost events", listing(@history.lock_lost_events))
    end

    def listing(counts)
      counts.empty? ? "0" : counts.map { |what, n| "#{what} #{n}" }.join(", ")
    end

    def mutex_rows
      overlaps_row("DistMutex", @checker.overlaps("mutex"))
      violations, across_wipe = @checker.fencing
      row("DistMutex fencing tokens not growing (unexplained / across a wipe)", "#{violations} / #{across_wipe}",
          failed: violations.positive?)
    end

    def overlaps_row(what, counts)
      row("#{what} overlapping (total / one reported LockLost / one hit ConnectionError / unexplained)",
          counts.values_at(:total, :lost, :conn, :unexplained).join(" / "), failed: counts[:unexplained].positive?)
    end

    # Each unexplained overlap, its two sections and the faults near them (times: seconds on the
    # run's shared clock).
    def unexplained_details
      %w[mutex dual].each do |prim|
        @checker.unexplained_overlaps(prim).each do |a, b, faults|
          puts "", "unexplained #{prim} overlap on #{a.name.inspect}:"
          [a, b].each { |s| puts "  #{s.id} pid #{s.pid}: #{span(s.s, s.e)} #{s.outcome} token #{s.token.inspect}" }
          faults.each { |f| puts "  fault #{f[:kind]}: #{span(f[:start], f[:end])}" }
        end
      end
    end

    def span(from, to)
      format("%<from>.4f..%<to>.4f", from: from, to: to)
    end

    def limiter_rows
      strict, all = @checker.max_holders
      row("ConcurrentLimiter(#{Settings::LIMIT}) max holders (excl. / incl. excused)", "#{strict} / #{all}",
          failed: strict > Settings::LIMIT)
    end

    def dual_rows
      overlaps_row("DualLock runs", @checker.overlaps("dual"))
      verdicts = @checker.dual_jobs
      row("DualLock jobs", verdicts.sort.map { |v, n| "#{v} #{n}" }.join(", "))
      row("DualLock lost updates", verdicts.fetch("lost", 0), failed: verdicts.key?("lost"))
    end

    def wait_rows
      @checker.waits.sort.each do |prim, (count, late, worst)|
        row("#{prim} waits past deadline + #{Settings::WAIT_TOLERANCE} s (late / waits, worst overrun)",
            format("%<late>d / %<count>d, %<worst>+.3f s", late: late, count: count, worst: worst),
            failed: late.positive?)
      end
    end

    def recovery_row
      worst = @checker.recovery.map { |kind, s| "#{kind} #{s ? format("%.2f", s) : "-"}" }
      row("worst recovery (s; lease #{Settings::LEASE} s)", worst.join(", "))
    end

    def other_rows
      crashes = @history.crashes
      row("workload threads crashed", "#{crashes.size} #{crashes.map { |c| c[:error] }.uniq.first(3).join("; ")}".strip,
          failed: crashes.any?)
      # Not a broken promise, but not a documented error class either: shown for a human to judge.
      row("other errors raised (not LockLost/ConnectionError/TimeoutError/OverLimit)",
          listing(@checker.other_errors.transform_keys { |k| k.delete_prefix("other:") }))
      row("sections never finished / workers hung / workers failed",
          "#{@checker.unfinished} / #{@hung.size} / #{@failed.size}",
          failed: @checker.unfinished.positive? || @hung.any? || @failed.any?)
    end
  end
end
