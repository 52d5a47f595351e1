# frozen_string_literal: true

require_relative "history"
require_relative "settings"

module Chaos
  # Checks a run's history against the promises: exclusive mutex sections with growing fencing
  # tokens, never more than LIMIT limiter holders, exclusive DualLock runs that lose no update,
  # and no wait past its deadline. Sections reported lost (LockLost) or ended with Redis
  # unreachable are excused from the exclusivity checks, as the contract allows.
  class Checker
    attr_reader :history, :faults

    def initialize(history, faults)
      @history = history
      @faults = faults
      @wipes = faults.select { |f| f[:kind] == :restart_wipe }
    end

    # Overlapping pairs of same-name sections of prim, by explanation:
    # { total:, lost: (one was reported LockLost), conn: (else one ended in ConnectionError), unexplained: }
    def overlaps(prim)
      counts = { total: 0, lost: 0, conn: 0, unexplained: 0 }
      overlapping_pairs(prim).each do |a, b|
        counts[:total] += 1
        counts[explanation(a.outcome, b.outcome)] += 1
      end
      counts
    end

    # The unexplained pairs themselves, with the faults that acted from a lease before the first
    # started until the second ended: [[a, b, faults], ...] (printed so a failed run can be read).
    def unexplained_overlaps(prim)
      overlapping_pairs(prim).select { |a, b| explanation(a.outcome, b.outcome) == :unexplained }.map do |a, b|
        near = @faults.select { |f| f[:end] >= a.s - Settings::LEASE && f[:start] <= [a.e, b.e].max }
        [a, b, near]
      end
    end

    # Consecutive non-excused mutex sections whose fencing token did not grow:
    # [violations, across a restart without persistence (not promised by one Redis)].
    def fencing
      shrinking = @history.sections_of("mutex").reject(&:excused?).group_by(&:name).values.flat_map do |sections|
        sections.sort_by(&:s).each_cons(2).reject { |a, b| grows?(a, b) }
      end
      across_wipe, violations = shrinking.partition { |a, b| wiped_between?(a, b) }
      [violations.size, across_wipe.size]
    end

    # Most limiter sections running at once: [non-excused only, all].
    def max_holders
      sections = @history.sections_of("limiter")
      [peak(sections.reject(&:excused?)), peak(sections)]
    end

    # DualLock jobs by verdict: ran, skipped_covered, reported (gave up or killed: a job system
    # retries/redelivers them), explained (skipped while a waiter that later failed stood in for
    # it), lost (skipped with no later run and nothing reported), unfinished.
    def dual_jobs
      runs = @history.sections_of("dual").group_by(&:name)
      attempts = @history.attempts.values.flatten.group_by(&:key)
      @history.jobs.each_value.map { |job| verdict(job, runs.fetch(job.key, []), attempts.fetch(job.key, [])) }.tally
    end

    # Waits that ended past their deadline + WAIT_TOLERANCE: { prim => [count, late, worst overrun] }.
    def waits
      @history.waits.group_by { |w| w[:prim] }.transform_values do |waits|
        overruns = waits.map { |w| w[:dur] - w[:limit] }
        [waits.size, overruns.count { |o| o > Settings::WAIT_TOLERANCE }, overruns.max]
      end
    end

    # Worst recovery per fault kind: seconds from the fault's end (a kill: the kill) to the next
    # section start of each name it affected (all names; a kill: those it held), the slowest
    # name counting.
    def recovery
      names = @history.sections.values.map { |s| [s.prim, s.name] }.uniq
      @faults.group_by { |f| f[:kind] }.transform_values do |faults|
        faults.map { |fault| recovery_of(fault, names) }.compact.max
      end
    end

    def unfinished
      @history.sections.values.count { |s| s.outcome == "unfinished" }
    end

    # Errors other than the documented ones (LockLost, ConnectionError, TimeoutError,
    # OverLimit), by message: { "other:Ferrolock::Error: ..." => count }.
    def other_errors
      outcomes = @history.waits.map { |w| w[:result] } + @history.sections.values.map(&:outcome) +
                 @history.attempts.values.flatten.map(&:result)
      outcomes.grep(/\Aother:/).tally
    end

    private

    def explanation(*outcomes)
      return :lost if outcomes.include?("lost")

      outcomes.include?("conn") ? :conn : :unexplained
    end

    def overlapping_pairs(prim)
      @history.sections_of(prim).group_by(&:name).values.flat_map do |sections|
        active = []
        sections.sort_by(&:s).flat_map do |section|
          active.select! { |other| other.e > section.s }
          pairs = active.map { |other| [other, section] }
          active << section
          pairs
        end
      end
    end

    def peak(sections)
      events = sections.flat_map { |s| [[s.s, 1], [s.e, -1]] }.sort_by { |time, delta| [time, delta] }
      events.reduce([0, 0]) { |(now, top), (_, delta)| [now + delta, [top, now + delta].max] }.last
    end

    def grows?(first, second)
      first.token.is_a?(Integer) && second.token.is_a?(Integer) && second.token > first.token
    end

    def wiped_between?(first, second)
      @wipes.any? { |wipe| first.s < wipe[:end] && second.s > wipe[:start] }
    end

    def verdict(job, runs, attempts)
      case job.result
      when "ran", "unfinished" then job.result
      when "skipped" then skipped_verdict(job, runs, attempts)
      else "reported"
      end
    end

    def skipped_verdict(job, runs, attempts)
      return "skipped_covered" if runs.any? { |run| run.s >= job.t }

      skipped_at = attempts.select { |a| a.job == job.job }.map(&:a0).max
      attempts.any? { |a| failed_waiter?(a, skipped_at) } ? "explained" : "lost"
    end

    # An attempt that never ran (raised, gave up or was killed) and was in progress at `time`,
    # or ended less than a lease before it (its wait lock outlives it by at most one lease): a
    # duplicate skipped at `time` relied on it. Its job is retried or redelivered, so the update
    # is not lost.
    def failed_waiter?(attempt, time)
      !%w[ran skipped].include?(attempt.result) && attempt.a0 <= time && attempt.a1 + Settings::LEASE >= time
    end

    def recovery_of(fault, names)
      kill = fault[:kind] == :kill_holder
      from = kill ? fault[:start] : fault[:end]
      (kill ? fault[:held].uniq : names).filter_map { |prim, name| recovery_for(prim, name, from) }.max
    end

    # For an exclusive primitive, a healthy holder still running when the fault ended delays
    # the next start legitimately: count from its end instead.
    def recovery_for(prim, name, from)
      from = [from, *healthy_holders_at(prim, name, from).map(&:e)].max if %w[mutex dual].include?(prim)
      next_start(prim, name, from)&.-(from)
    end

    def healthy_holders_at(prim, name, time)
      @history.sections.values.select do |s|
        s.prim == prim && s.name == name && s.outcome == "ok" && s.s < time && s.e > time
      end
    end

    def next_start(prim, name, after)
      @starts ||= @history.sections.values.group_by { |s| [s.prim, s.name] }.transform_values { |l| l.map(&:s).sort }
      @starts.fetch([prim, name], []).bsearch { |s| s > after }
    end
  end
end
