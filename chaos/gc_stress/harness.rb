# frozen_string_literal: true

# One stress process of chaos/gc_stress.rb (which starts Redis, runs this, and judges the result):
#   ruby -Ilib chaos/gc_stress/harness.rb MODE URL SECONDS RESULTS SEED
# MODE compact: rounds of worker threads over every primitive with GC.auto_compact, a GC.compact
#   thread and a Thread#raise / Thread#kill storm; GC.verify_compaction_references after each round.
# MODE control: as compact, with Ruby's own Mutex, Timeout, pipes and forks instead of ferrolock.
# MODE stress: GC.stress = true over DistMutex and RateLimiter basics (small: every allocation GCs).
# Exit status: 0 fine, 2 a broken invariant, 3 a hung worker, 4 unexpected exceptions.
require "json"
# The control run does not even load the extension (a crash there is Ruby's own).
require "ferrolock" unless ARGV.first == "control"
require_relative "tally"
require_relative "loads"
require_relative "storm"
require_relative "gc_pass"

module Chaos
  module GcStress
    # Runs the rounds of one stress process and writes what happened to RESULTS (JSON).
    class Harness
      # Threads per load in a round.
      THREADS = { MutexLoad => 4, LimiterLoad => 4, DualLoad => 3, RateLoad => 2, ClientLoad => 3 }.freeze
      # The control run: as many threads, no ferrolock call (see ControlLoad).
      CONTROL = { ControlLoad => 16 }.freeze
      ROUND = 6.0
      # Seconds a worker may run past its round's end (its longest wait is WAIT, a fork child's
      # CHILD_WAIT) before it counts as hung.
      HANG_GRACE = ForkHold::CHILD_WAIT + 10

      def initialize(url:, seconds:, results:, seed:, control: false)
        @threads = control ? CONTROL : THREADS
        @mode = control ? "control" : "compact"
        @seconds = seconds
        @results = results
        tally = Tally.new
        client = control ? nil : Ferrolock::Client.new(url: url, namespace: NAMESPACE)
        @env = Env.new(url: url, client: client, tally: tally,
                       sections: Sections.new(tally, mutex: 1, limiter: LIMIT, dual: 1),
                       rng: Random.new(seed), fork_gate: Mutex.new)
        @loads = @threads.keys.to_h { |klass| [klass, klass.new(@env)] }
        @rounds = []
      end

      def run
        GC.auto_compact = true
        deadline = now + @seconds
        while (left = deadline - now) > 1
          run_round(@rounds.size + 1, [ROUND, left].min)
          break if hung?
        end
        finish
      end

      private

      def run_round(number, duration)
        started = now
        storm = Storm.new(@env.rng)
        start_workers(storm, started + duration)
        stuck = join(storm, started + duration + HANG_GRACE)
        compacted = verify_compaction
        window = @loads[RateLoad]&.take_granted || 0
        check_window(window, now - started)
        @rounds << { round: number, seconds: (now - started).round(2), raises: storm.raises, kills: storm.kills,
                     compactions: storm.compactions, window_grants: window, stuck: stuck, verify: compacted }
        progress(number, storm, stuck)
      end

      def progress(number, storm, stuck)
        puts "round #{number}: #{@env.tally.operations} ops so far, #{storm.raises} raises, #{storm.kills} kills, " \
             "#{storm.compactions} GC.compact#{", #{stuck.size} STUCK" unless stuck.empty?}"
      end

      def start_workers(storm, stop)
        @threads.each do |klass, count|
          count.times { storm.add(worker(@loads.fetch(klass), stop)) }
        end
        storm.start(stop) { |load| worker(load, stop) }
      end

      # A worker picks ops until `stop`. Asynchronous exceptions land only inside an op (see
      # Load#perform), never in this loop's bookkeeping.
      def worker(load, stop)
        thread = Thread.new do
          Thread.handle_interrupt(Object => :never) do
            load.perform(load.pick(load.send(:rng))) while now < stop
          end
        end
        thread.report_on_exception = false
        thread[:gc_stress_load] = load
        thread
      end

      # Joins every worker (those the storm started as replacements too, so the storm ends
      # first); returns the stuck ones' descriptions (with backtraces) after `deadline`.
      def join(storm, deadline)
        storm.finish
        stuck = storm.threads.filter_map do |thread|
          next if join_quietly(thread, deadline)

          "#{thread[:gc_stress_load].name} worker #{thread.inspect}:\n    #{(thread.backtrace || []).join("\n    ")}"
        end
        stuck.each { |text| @env.tally.problem("hung #{text}") }
        stuck
      end

      # A worker may end by the storm's last exception (queued as its loop ended): that is
      # not a failure, only the join's way of saying so. Anything else got past Load#perform.
      def join_quietly(thread, deadline)
        thread.join([deadline - now, 0].max)
      rescue *ASYNC
        true
      rescue Exception => e # rubocop:disable Lint/RescueException -- reported, not raised: the run goes on
        @env.tally.unexpected(thread[:gc_stress_load].name, "worker thread", e)
        true
      end

      # Moves every object it can toward empty pages and checks every reference was updated.
      def verify_compaction
        started = now
        GC.verify_compaction_references(**GcPass.verify_options)
        (now - started).round(2)
      end

      # The fixed window lets COUNT calls per second of Redis time: a round of s seconds spans at
      # most s + 2 windows (plus the waits at its edges).
      def check_window(grants, seconds)
        most = RateLoad::COUNT * (seconds.ceil + 2 + WAIT)
        @env.tally.problem("rate window: #{grants} grants in #{seconds.round(1)} s (at most #{most})") if grants > most
      end

      def hung?
        @rounds.last && !@rounds.last[:stuck].empty?
      end

      def finish
        report = @env.tally.to_h.merge(rounds: @rounds, most_holders: @env.sections.most, mode: @mode,
                                       ruby: RUBY_DESCRIPTION, stale_unblock_calls: GcPass.stale_unblock_calls)
        File.write(@results, JSON.generate(report))
        exit(exit_status(report))
      end

      def exit_status(report)
        return 3 if hung?
        return 2 unless report[:problems].empty?
        return 4 unless report[:unexpected].empty?

        0
      end

      def now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end

if $PROGRAM_NAME == __FILE__
  # A thread dump on SIGUSR1: the supervisor's watchdog asks for one before it kills a hung run.
  trap("USR1") do
    Thread.list.each { |t| warn "#{t.inspect}\n  #{(t.backtrace || []).join("\n  ")}" }
  end
  # SIGUSR2 is sent by the storm (to this process) and by fork_hold (to its children) to make
  # Ruby's signal handler run, on whichever thread gets it, while native calls block.
  trap("USR2") { nil }
  $stdout.sync = true
  mode, url, seconds, results, seed = ARGV
  options = { url: url, seconds: Float(seconds), results: results, seed: Integer(seed) }
  case mode
  when "compact" then Chaos::GcStress::Harness.new(**options).run
  when "control" then Chaos::GcStress::Harness.new(**options, control: true).run
  when "stress" then Chaos::GcStress::GcPass.new(**options).run
  else abort "usage: harness.rb compact|stress URL SECONDS RESULTS SEED"
  end
end
