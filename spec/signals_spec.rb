# frozen_string_literal: true

require "fiddle"
require "json"
require "open3"

# Signals and ferrolock's own threads (issue 32). When the main thread is the only Ruby thread,
# Ruby's signal handler calls the blocked call's unblocking function itself, on whichever OS
# thread got the signal, racing with the call's end. So ferrolock's threads (lease watchdog,
# grant inbox) block signals, and the unblocking function's argument outlives its call
# (ext/ferrolock/src/unblock.rs); Native.stale_unblock_calls counts calls that came too late.
module FerrolockTest
  module Signals
    # One Ruby thread that holds a lock (so the lease watchdog runs) and makes blocking calls
    # (locked? round trips) for `seconds`, with traps on the signals sent; prints a JSON report.
    CHILD = <<~RUBY
      require "ferrolock"
      require "json"
      trapped = 0
      %w[USR2 URG].each { |signal| trap(signal) { trapped += 1 } }
      client = Ferrolock::Client.new(url: ENV.fetch("REDIS_URL"))
      native = client.native
      client.eviction_check.join
      held = Ferrolock::Native::DistMutex.new(native, "signals-held", nil, true, 30.0, 0, 0, true, true)
      hold = held.lock(nil)
      probe = Ferrolock::Native::DistMutex.new(native, "signals-probe", nil, true, 30.0, 0, 0, true, true)
      $stdout.puts(Thread.list.size)
      $stdout.flush
      calls = 0
      errors = Hash.new(0)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0])
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        begin
          probe.locked?
          calls += 1
        rescue Ferrolock::Error => e
          errors[e.class.name] += 1
        end
      end
      # A process-directed signal still reaches its trap (a Ruby thread takes it).
      before = trapped
      Process.kill("USR2", Process.pid)
      500.times { trapped > before ? break : sleep(0.01) }
      held.unlock(hold)
      $stdout.puts(JSON.generate(calls: calls, trapped: trapped, process_signal_trapped: trapped > before,
                                 errors: errors, stale: Ferrolock::Native.stale_unblock_calls))
    RUBY

    TGKILL = Fiddle::Function.new(Fiddle.dlopen(nil)["tgkill"], [Fiddle::TYPE_INT] * 3, Fiddle::TYPE_INT)

    # Sends signal to thread tid of process pid; true when sent.
    def self.tgkill(pid, tid, signal)
      TGKILL.call(pid, tid, Signal.list.fetch(signal)).zero?
    end

    # The core's OS threads, as /proc shows their names (15 bytes at most). Ruby threads of
    # ferrolock are named "ferrolock-…" too (reaper, eviction check): they take signals.
    NATIVE_THREADS = %w[ferrolock-watchdog ferrolock-inbox].map { |name| name[0, 15] }.freeze
  end
end

RSpec.describe "signals sent to ferrolock's own threads" do
  # pid's native ferrolock threads: { tid => name }.
  def ferrolock_threads(pid)
    Dir["/proc/#{pid}/task/*"].to_h { |task| [Integer(File.basename(task)), File.read("#{task}/comm").strip] }
                              .select { |_tid, name| FerrolockTest::Signals::NATIVE_THREADS.include?(name) }
  end

  # The signals a thread blocks (SigBlk of /proc/PID/task/TID/status), as a bit mask.
  def blocked_mask(pid, tid)
    Integer(File.read("/proc/#{pid}/task/#{tid}/status")[/^SigBlk:\s*(\h+)/, 1], 16)
  end

  def bit(signal)
    1 << (Signal.list.fetch(signal) - 1)
  end

  # Runs the child for `seconds`, sending it bursts of SIGUSR2/SIGURG with tgkill at each of its
  # native ferrolock threads meanwhile. [the child's report, { thread name => SigBlk }, signals sent].
  def run_child(seconds)
    env = { "REDIS_URL" => FerrolockTest.redis_server.url }
    command = [RbConfig.ruby, "-I", FerrolockTest::LIB, "-e", FerrolockTest::Signals::CHILD, seconds.to_s]
    Open3.popen3(env, *command) do |stdin, stdout, stderr, wait|
      stdin.close
      err = Thread.new { stderr.read }
      ruby_threads = Integer(stdout.gets || raise("child failed: #{err.value}"))
      expect(ruby_threads).to eq(1) # else Ruby never calls the unblocking function from a handler
      # A new thread names itself as it starts: wait for the watchdog's name.
      threads = wait_until(what: "the child's watchdog thread") do
        found = ferrolock_threads(wait.pid)
        found if found.value?(FerrolockTest::Signals::NATIVE_THREADS.first)
      end
      masks = threads.to_h { |tid, name| [name, blocked_mask(wait.pid, tid)] }
      sent = 0
      while wait.alive? && sent < 2_000_000
        threads.each_key do |tid|
          sent += 1 if FerrolockTest::Signals.tgkill(wait.pid, tid, sent.even? ? "USR2" : "URG")
        end
        Thread.pass if (sent % 64).zero?
      end
      report = stdout.read
      status = wait.value
      raise "child failed (#{status.inspect}):\n#{err.value}\n#{report}" unless status.success?

      [JSON.parse(report.lines.last), masks, sent]
    end
  end

  it "never run Ruby's handler: no unblocking call comes after its call ended", :aggregate_failures, time_limit: 60 do
    report, masks, sent = run_child(5)
    warn "signals: sent #{sent}, masks #{masks}, child #{report}" if ENV["FERROLOCK_SIGNALS_REPORT"]
    masks.each_value do |mask|
      expect(mask & bit("USR2")).not_to eq(0)
      expect(mask & bit("URG")).not_to eq(0)
      expect(mask & bit("INT")).not_to eq(0)
      expect(mask & bit("SEGV")).to eq(0) # a fault still gets Ruby's crash report
    end
    expect(sent).to be > 1000
    expect(report["calls"]).to be > 100
    expect(report["stale"]).to eq(0)
    expect(report["process_signal_trapped"]).to be(true)
  end
end
