# frozen_string_literal: true

# The crawler's timed mutex: 3 workers share one "1 request per 0.5 s to example.com" spacer
# (expire: 0.5, auto_release: false), each request taking longer than the spacing; then a
# plain mutex held far longer than its lease, and the hand-off to a waiting process.
Demo.scenario("DistMutex: 3 crawler workers spaced 1 request / 0.5 s; leases; hand-off") do |report|
  client = Demo.client
  starts = Queue.new
  workers = Array.new(3) do |worker|
    Thread.new do
      spacer = Ferrolock::DistMutex.new("crawl:example.com", expire: 0.5, auto_release: false, client: client)
      3.times do
        spacer.synchronize do
          starts << [Demo.monotonic, worker]
          sleep 0.8 # the "request": longer than the spacing, so requests overlap
        end
      end
    end
  end
  workers.each(&:join)
  times = Array.new(starts.size) { starts.pop }.sort
  first = times.first.first
  report.line("request starts (s, worker)", times.map { |t, w| format("%.2f/w%d", t - first, w) }.join("  "))
  gaps = times.each_cons(2).map { |(a, _), (b, _)| b - a }
  report.check("9 requests, consecutive starts >= 0.5 s apart", times.size == 9 && gaps.min >= 0.49,
               format("smallest gap %.3f s", gaps.min))

  long = Ferrolock::DistMutex.new("nightly-report", lease: 0.3, client: client)
  intruder = Ferrolock::DistMutex.new("nightly-report", client: client)
  got_in = false
  long.synchronize do
    6.times do
      got_in ||= intruder.try_lock
      sleep 0.1
    end
  end
  report.check("a 0.6 s block with a 0.3 s lease stays exclusive (lease renewed)", !got_in)

  read, write = IO.pipe
  holder = Ferrolock::DistMutex.new("handoff", client: client)
  holder.lock
  pid = fork do
    read.close
    waiter = Ferrolock::DistMutex.new("handoff", client: client)
    waiter.lock
    write.puts(Demo.monotonic)
    waiter.unlock
    exit!(0)
  end
  write.close
  sleep 0.3 # the child is now waiting in Redis (BLPOP), not polling
  released = Demo.monotonic
  holder.unlock
  acquired = read.read.to_f
  Process.wait(pid)
  report.line("hand-off to a waiting process", report.ms(acquired - released))
  # A poller would miss by its interval; a hand-off costs a few wake-ups of a blocked process, which a busy
  # machine slows: the bound is 5 ms plus four of the wake-ups measured here and now.
  wake = Demo.process_wake_up
  bound = 0.005 + (4 * wake)
  report.check("hand-off under #{report.ms(bound)} (no polling interval)", acquired - released < bound,
               "a blocked process's wake-up took #{report.ms(wake)} now")
  m = Ferrolock::DistMutex.new("fenced", client: client)
  tokens = Array.new(3) { m.synchronize { m.fencing_token } }
  report.check("fencing tokens grow with every holder", tokens == tokens.sort.uniq, tokens.inspect)
end
