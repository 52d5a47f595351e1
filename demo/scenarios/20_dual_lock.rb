# frozen_string_literal: true

# The media site's sync job: a record update enqueues "mirror record 42"; bulk updates enqueue it
# many times. DualLock runs one, keeps one waiting and skips the rest, so few runs happen and
# the mirror still ends with the last value. Then the original three-arrival scenario, and a
# holder killed with SIGKILL.
Demo.scenario("DualLock: 200 updates mirrored by a handful of runs; run/wait/skip; kill -9") do |report|
  client = Demo.client
  record = { value: nil }
  mirror = { value: nil }
  triggers = Queue.new
  runs = Queue.new
  workers = Array.new(5) do
    Thread.new do
      lock = Ferrolock::DualLock.new("sync:record:42", client: client)
      while triggers.pop
        lock.run do
          runs << Demo.monotonic
          value = record[:value]
          sleep 0.05 # copying to the other store
          mirror[:value] = value
        end
      end
    end
  end
  last_push = nil
  200.times do |i|
    record[:value] = i
    last_push = Demo.monotonic
    triggers << true
    sleep 0.001
  end
  5.times { triggers << nil }
  workers.each(&:join)
  starts = Array.new(runs.size) { runs.pop }
  report.line("200 updates of record 42", "#{starts.size} sync runs, #{200 - starts.size} duplicates skipped")
  report.check("the mirror holds the last value", mirror[:value] == 199, "mirror = #{mirror[:value].inspect}")
  report.check("the last run started after the last update", starts.max >= last_push)

  log = Queue.new
  arrivals = [["first", 0], ["second", 0.1], ["third", 0.3]].map do |name, delay|
    Thread.new do
      sleep delay
      ran = Ferrolock::DualLock.new("orig", client: client).run do
        log << [name, :start, Demo.monotonic]
        sleep 0.6
        log << [name, :end, Demo.monotonic]
      end
      log << [name, :skipped, Demo.monotonic] unless ran
    end
  end
  arrivals.each(&:join)
  events = Array.new(log.size) { log.pop }
  at = ->(name, what) { events.find { |n, w, _| n == name && w == what }&.last }
  report.check("first runs, second waits then runs, third is skipped",
               at["first", :start] && at["second", :start] && at["third", :skipped] && !at["third", :start])
  handoff = at["second", :start] - at["first", :end]
  report.line("release -> waiter starts", report.ms(handoff))
  report.check("the waiter is woken by the release (under 20 ms, no polling)", handoff < 0.02)

  pid = fork do
    Ferrolock::DualLock.new("crash", lease: 1, client: Demo.client).run { Process.kill("KILL", Process.pid) }
  end
  Process.wait(pid)
  lock = Ferrolock::DualLock.new("crash", lease: 1, client: client)
  held = lock.executing?
  started = Demo.monotonic
  lock.run { nil }
  waited = Demo.monotonic - started
  report.line("after a kill -9 mid-run, the next ran after", format("%.2f s (lease 1 s)", waited))
  report.check("the crashed run blocked the key for at most its lease", held && waited <= 1.5)
end
