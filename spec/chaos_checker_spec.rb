# frozen_string_literal: true

require "tmpdir"
require_relative "../chaos/checker"

# bin/chaos passes only if its checker can see a broken promise: these feed it hand-written
# histories with and without violations (no Redis involved).
RSpec.describe "bin/chaos checker" do
  around do |example|
    Dir.mktmpdir("chaos-checker-") do |dir|
      @dir = dir
      example.run
    end
  end

  # records: { pid => [record, ...] }, one journal per pid, as the workers write them.
  def check(records, faults: [], kills: {})
    paths = records.map do |pid, lines|
      path = File.join(@dir, "worker-#{pid}.jsonl")
      journal = Chaos::Journal.new(path)
      lines.each { |line| journal.write(line) }
      journal.close
      path
    end
    Chaos::Checker.new(Chaos::History.new(paths, kills), faults)
  end

  def section(prim, id, name, from, to, outcome: "ok", token: nil, pid: 1)
    [{ ev: "start", prim: prim, id: id, name: name, s: from, pid: pid, token: token },
     { ev: "end", id: id, e: to, outcome: outcome }]
  end

  describe "DistMutex overlaps" do
    it "counts overlapping sections as unexplained unless one was reported lost or hit a ConnectionError" do
      checker = check({ 1 => section("mutex", "a", "m0", 1.0, 2.0, token: 1) +
                             section("mutex", "b", "m0", 1.5, 2.5, token: 2) +
                             section("mutex", "c", "m0", 3.0, 4.0, outcome: "lost", token: 3) +
                             section("mutex", "d", "m0", 3.5, 4.5, token: 4) +
                             section("mutex", "e", "m1", 1.2, 1.8, token: 1) +
                             section("mutex", "f", "m1", 1.5, 2.0, outcome: "conn", token: 2) +
                             section("mutex", "g", "m1", 2.5, 3.0, token: 3) })
      expect(checker.overlaps("mutex")).to eq(total: 3, lost: 1, conn: 1, unexplained: 1)
      expect(checker.unexplained_overlaps("mutex").map { |a, b, _faults| [a.id, b.id] }).to eq([%w[a b]])
    end

    it "ends a section cut short by kill -9 at the kill, and reports one without an end line" do
      records = { 7 => [{ ev: "start", prim: "mutex", id: "k", name: "m0", s: 1.0, pid: 7, token: 1 }],
                  8 => section("mutex", "after", "m0", 2.5, 3.0, token: 2, pid: 8) +
                       section("mutex", "during", "m0", 1.5, 1.6, token: 3, pid: 8) +
                       [{ ev: "start", prim: "mutex", id: "open", name: "m1", s: 5.0, pid: 8, token: 9 }] }
      checker = check(records, kills: { 7 => 2.0 })
      expect(checker.overlaps("mutex")).to eq(total: 1, lost: 0, conn: 0, unexplained: 1)
      expect(checker.unfinished).to eq(1)
    end

    # Killed after its release handed the lock on but before its "end" line: not an overlap.
    it "ends a killed section where its block ended, when that line was written before the kill" do
      records = { 7 => [{ ev: "start", prim: "dual", id: "k", name: "d0", s: 1.0, pid: 7 },
                        { ev: "ended", id: "k", e: 1.2 }],
                  8 => section("dual", "next", "d0", 1.21, 1.5, pid: 8) }
      checker = check(records, kills: { 7 => 1.3 })
      expect(checker.overlaps("dual")).to eq(total: 0, lost: 0, conn: 0, unexplained: 0)
      expect(checker.history.sections["k"].to_h.values_at(:e, :outcome)).to eq([1.2, "killed"])
      expect(check(records.merge(7 => records[7].first(1)), kills: { 7 => 1.3 }).overlaps("dual")[:unexplained])
        .to eq(1)
    end
  end

  describe "fencing tokens" do
    it "flags a token that did not grow, apart from pairs across a restart without persistence" do
      wipe = { kind: :restart_wipe, start: 10.0, end: 10.5 }
      checker = check({ 1 => section("mutex", "a", "m0", 1.0, 1.1, token: 5) +
                             section("mutex", "b", "m0", 2.0, 2.1, token: 4) +
                             section("mutex", "c", "m0", 3.0, 3.1, outcome: "lost", token: 1) +
                             section("mutex", "d", "m0", 9.0, 9.1, token: 6) +
                             section("mutex", "e", "m0", 11.0, 11.1, token: 1) +
                             section("mutex", "f", "m0", 12.0, 12.1, token: 2) },
                      faults: [wipe])
      expect(checker.fencing).to eq([1, 1])
    end
  end

  describe "ConcurrentLimiter holders" do
    it "counts the most sections running at once, with and without the excused ones" do
      sections = (1..3).flat_map { |i| section("limiter", "ok#{i}", "lim", i.to_f, 10.0) } +
                 section("limiter", "lost", "lim", 4.0, 5.0, outcome: "lost") +
                 section("limiter", "later", "lim", 10.0, 11.0)
      expect(check({ 1 => sections }).max_holders).to eq([3, 4])
      expect(check({ 1 => sections + section("limiter", "extra", "lim", 4.5, 4.8) }).max_holders).to eq([4, 5])
    end
  end

  describe "DualLock updates" do
    def job(id, key, triggered, result, attempts)
      [{ ev: "trigger", job: id, key: key, t: triggered, pid: 1 }] +
        attempts.flat_map do |from, to, outcome|
          [{ ev: "attempt", job: id, key: key, a0: from, pid: 1 },
           { ev: "attempt_end", job: id, a1: to, result: outcome }]
        end + [{ ev: "job_done", job: id, result: result }]
    end

    it "calls a skipped update lost unless a later run or a failed waiter covers it" do
      records = job("ran", "d0", 1.0, "ran", [[1.0, 1.2, "ran"]]) + section("dual", "ran", "d0", 1.1, 1.2) +
                job("covered", "d0", 1.05, "skipped", [[1.05, 1.05, "skipped"]]) +
                job("waiter", "d1", 2.0, "timeout", [[2.0, 4.0, "timeout"]]) +
                job("explained", "d1", 2.5, "skipped", [[2.5, 2.5, "skipped"]]) +
                job("lost", "d0", 5.0, "skipped", [[5.0, 5.0, "skipped"]])
      expect(check({ 1 => records }).dual_jobs)
        .to eq("ran" => 1, "skipped_covered" => 1, "reported" => 1, "explained" => 1, "lost" => 1)
    end
  end

  describe "waits" do
    it "flags a wait that ended later than its deadline plus the tolerance" do
      late = Chaos::Settings::WAIT_TOLERANCE + 0.2
      waits = [{ ev: "wait", prim: "mutex", dur: 1.0, limit: 1.0, result: "timeout" },
               { ev: "wait", prim: "mutex", dur: 1.0 + late, limit: 1.0, result: "conn" }]
      count, late_count, worst = check({ 1 => waits }).waits.fetch("mutex")
      expect([count, late_count]).to eq([2, 1])
      expect(worst).to be_within(1e-9).of(late)
    end
  end

  describe "recovery" do
    it "measures from a kill to the next start of what the killed worker held" do
      kill = { kind: :kill_holder, start: 2.0, end: 2.2, held: [%w[mutex m0]] }
      records = { 1 => section("mutex", "a", "m0", 3.5, 3.6) + section("mutex", "b", "m1", 2.1, 2.2) }
      expect(check(records, faults: [kill]).recovery.fetch(:kill_holder)).to be_within(1e-9).of(1.5)
    end
  end
end
