# frozen_string_literal: true

require_relative "journal"

module Chaos
  # Everything the workers wrote, joined: sections (start + end lines), waits, DualLock jobs
  # and their attempts. A section or attempt cut short by a kill -9 ends at the kill's time.
  class History
    Section = Struct.new(:prim, :name, :id, :pid, :s, :e, :token, :outcome, keyword_init: true) do
      # Reported not exclusive (LockLost) or ended with Redis unreachable: an overlap with it is
      # explained, as the brief's contract says.
      def excused?
        %w[lost conn].include?(outcome)
      end
    end
    Attempt = Struct.new(:job, :key, :pid, :a0, :a1, :result, keyword_init: true)
    Job = Struct.new(:job, :key, :pid, :t, :result, keyword_init: true)

    attr_reader :sections, :waits, :jobs, :attempts, :lock_lost_events, :crashes

    def initialize(journals, kills)
      @kills = kills # pid => kill time
      @sections = {}
      @waits = []
      @jobs = {}
      @attempts = {}
      @lock_lost_events = Hash.new(0)
      @crashes = []
      journals.each { |path| Journal.read(path).each { |record| add(record) } if File.exist?(path) }
      close_cut_short
    end

    def sections_of(prim)
      @sections.values.select { |section| section.prim == prim }
    end

    private

    def add(record)
      case record[:ev]
      when "start" then @sections[record[:id]] = Section.new(**record.slice(:prim, :name, :id, :pid, :s, :token))
      when "ended", "end" then section_ended(record)
      when "wait" then @waits << record
      when "trigger" then @jobs[record[:job]] = Job.new(**record.slice(:job, :key, :pid, :t))
      when "job_done" then @jobs.fetch(record[:job]).result = record[:result]
      else add_other(record)
      end
    end

    # "ended": the block's end, written before the release; "end": the release's outcome too.
    def section_ended(record)
      section = @sections.fetch(record[:id])
      section.e = record[:e]
      section.outcome = record[:outcome] if record[:ev] == "end"
    end

    def add_other(record)
      case record[:ev]
      when "attempt"
        (@attempts[record[:job]] ||= []) << Attempt.new(job: record[:job], key: record[:key], pid: record[:pid],
                                                        a0: record[:a0])
      when "attempt_end" then @attempts.fetch(record[:job]).last.tap { |a| a.a1 = record[:a1] }.result = record[:result]
      when "lock_lost" then @lock_lost_events[record[:prim]] += 1
      when "crash" then @crashes << record
      end
    end

    # A section, attempt or job without its end line belongs to a killed worker (ends at the
    # kill, or where its block ended if that was written) or to one that never finished
    # (reported as "unfinished").
    def close_cut_short
      @sections.each_value { |section| close_section(section) if section.outcome.nil? }
      @attempts.values.flatten.each { |attempt| close_attempt(attempt) if attempt.result.nil? }
      @jobs.each_value { |job| job.result ||= cut_short(job.pid, job.t).last }
    end

    def close_section(section)
      ended, section.outcome = cut_short(section.pid, section.s)
      section.e ||= ended
    end

    def close_attempt(attempt)
      attempt.a1, attempt.result = cut_short(attempt.pid, attempt.a0)
    end

    def cut_short(pid, started)
      killed = @kills[pid]
      killed ? [killed, "killed"] : [started, "unfinished"]
    end
  end
end
