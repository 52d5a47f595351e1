# frozen_string_literal: true

# Contended ConcurrentLimiter: a release hands its slot straight to the first waiter still in
# line, across processes, in the order they queued; a waiter that gives up with a slot in flight
# passes it on at once; a waiter killed after the hand-off keeps the slot one lease at most; and
# the limit holds under many threads and processes while some are killed.
RSpec.describe "ConcurrentLimiter hand-off" do
  let(:server) { FerrolockTest.redis_server }
  let(:redis) { server.redis }
  let(:client) { Ferrolock::Client.new(url: server.url, namespace: "clh") }

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def limiter(name, count, lock_timeout: 30, wait_timeout: 30)
    Ferrolock::ConcurrentLimiter.new(name, count, lock_timeout: lock_timeout, wait_timeout: wait_timeout,
                                                  client: client)
  end

  def until_waiting(limiter, count)
    deadline = now + 20
    until limiter.status[:waiting] >= count
      raise "#{count} waiters never queued" if now > deadline

      sleep 0.002
    end
  end

  # Nothing held or waiting once settled. A slot that reached a waiter as it gave up is passed on by
  # that waiter's release, in the background when an exception cut its wait (milliseconds), never
  # kept for the 30 s lease; meanwhile the cohort hand-off may already have let the next waiter in.
  def expect_settles_free(limiter)
    deadline = now + 5
    sleep 0.01 until limiter.status.values_at(:in_use, :waiting) == [0, 0] || now > deadline
    expect(limiter.status).to include(in_use: 0, waiting: 0)
  end

  # A child process that waits for a slot, then runs the block inside it.
  def waiting_child(name, count, lock_timeout: 30, &section)
    fork_child { limiter(name, count, lock_timeout: lock_timeout).within_limit(&section) }
  end

  # Holds every slot of `name` in threads; returns a lambda that frees one per call.
  def hold_all(limiter)
    release = Queue.new
    held = Queue.new
    threads = Array.new(limiter.count) do
      Thread.new do
        limiter.within_limit do
          held << true
          release.pop
        end
      end
    end
    limiter.count.times { held.pop }
    [-> { release << true }, threads]
  end

  it "hands slots to waiting processes in the order they queued" do
    holder = limiter("fifo", 2)
    free_one, holders = hold_all(holder)
    pids = Array.new(5) do |i|
      pid = waiting_child("fifo", 2) { client.call("RPUSH", "entered", i.to_s) }
      until_waiting(holder, i + 1)
      pid
    end
    # One slot freed: it passes from child to child, in line order (the other stays held).
    free_one.call
    expect_children_succeed(pids)
    free_one.call
    holders.each(&:join)
    expect(redis.call("LRANGE", "entered", 0, -1)).to eq(%w[0 1 2 3 4])
    expect(holder.status).to include(in_use: 0, waiting: 0)
  end

  it "passes on a slot that reaches a waiter as it gives up, so the next waiter enters at once" do
    30.times do |round|
      name = "given-up-#{round}"
      holder = limiter(name, 1)
      free_one, holders = hold_all(holder)
      leaving = Thread.new do
        Thread.current.report_on_exception = false
        limiter(name, 1).within_limit { :first }
      end
      until_waiting(holder, 1)
      entered = Queue.new
      second = Thread.new { limiter(name, 1).within_limit { entered << now } }
      until_waiting(holder, 2)
      # The release and the first waiter's exception race: its slot, granted or not, must end up
      # with the second waiter within ms, not after the 30 s lease.
      released = now
      free_one.call
      sleep(rand * 0.002) if round.odd?
      leaving.raise(RuntimeError, "gave up")
      begin
        leaving.join
      rescue RuntimeError => e
        expect(e.message).to eq("gave up")
      end
      expect(Timeout.timeout(10) { entered.pop } - released).to be < 2
      second.join
      holders.each(&:join)
      expect_settles_free(holder)
    end
  end

  it "gives a slot that reaches a waiter at its wait_timeout to that waiter or the next one" do
    20.times do |round|
      name = "timed-out-#{round}"
      holder = limiter(name, 1)
      free_one, holders = hold_all(holder)
      first = Thread.new do
        limiter(name, 1).within_limit(wait_timeout: 0.3) { :first }
      rescue Ferrolock::OverLimit
        :over
      end
      until_waiting(holder, 1)
      second = Thread.new { limiter(name, 1).within_limit(wait_timeout: 10) { now } }
      until_waiting(holder, 2)
      # Around the first waiter's deadline (it queued a few ms ago).
      sleep(0.27 + (rand * 0.06))
      released = now
      free_one.call
      outcomes = [first.value, second.value]
      expect(outcomes.first).to eq(:first).or eq(:over)
      expect(outcomes.last - released).to be < 2
      holders.each(&:join)
      expect_settles_free(holder)
    end
  end

  it "lets a waiter killed after the hand-off keep the slot one lease at most" do
    lease = 1.0
    holder = limiter("killed", 1, lock_timeout: lease)
    free_one, holders = hold_all(holder)
    victim = waiting_child("killed", 1, lock_timeout: lease) { sleep 60 }
    until_waiting(holder, 1)
    Process.kill(:KILL, victim)
    Process.wait(victim)
    # The victim is still first in line: the release hands it the slot, which nobody renews.
    free_one.call
    holders.each(&:join)
    expect(holder.status[:in_use]).to eq(1)
    started = now
    limiter("killed", 1, lock_timeout: lease).within_limit(wait_timeout: 20) { :ok }
    # One lease (and the 1 s re-check) plus slack for a loaded VM; what matters is "not 20 s".
    expect(now - started).to be < lease + 4
  end

  # Every block records when it entered and left (CLOCK_MONOTONIC is system-wide on Linux);
  # a killed process's open block ends at its kill.
  it "never lets more than `count` blocks in, across threads and processes, while some are killed" do
    count = 3
    stop_at = now + 4
    pids = Array.new(4) do |p|
      fork do
        l = limiter("many", count, lock_timeout: 1, wait_timeout: 20)
        Array.new(4) do |t|
          Thread.new do
            while now < stop_at
              l.within_limit do
                client.call("RPUSH", "events", "in #{p}.#{t} #{now}")
                sleep(rand * 0.004)
                client.call("RPUSH", "events", "out #{p}.#{t} #{now}")
              end
            end
          end
        end.each(&:join)
        exit!(0)
      end
    end
    killed = {}
    2.times do |i|
      sleep 1
      Process.kill(:KILL, pids[i])
      killed[i.to_s] = now
    end
    pids.each { |pid| Process.wait(pid) }
    events = redis.call("LRANGE", "events", 0, -1).map(&:split)
    open = {}
    timeline = []
    events.each do |kind, who, at|
      timeline << [Float(at), kind == "in" ? 1 : -1]
      kind == "in" ? open[who] = true : open.delete(who)
    end
    open.each_key { |who| timeline << [killed.fetch(who.split(".").first), -1] }
    inside = 0
    most = timeline.sort.map { |_, step| inside += step }.max
    expect(events.count { |kind, _, _| kind == "in" }).to be > 50
    expect(most).to be <= count
    expect(most).to eq(count) # the run was contended: the check could have failed
  end
end
