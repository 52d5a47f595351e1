# frozen_string_literal: true

require "redis"
require "timeout"

# The cohort hand-off (issue 27, ext/ferrolock-core/src/line/cohort.rs): an unlock that finds another
# thread of its process waiting for the name passes the lock to it without Redis, at most
# local_passes times in a row, then the lock goes back through Redis' FIFO line. Every section
# below runs one script in the test Redis that counts holders inside ("inside", "overlaps") and
# logs "process|fencing token|sections done when it started waiting|its own section number", in
# the order sections ran (they are exclusive, which the same log checks).
# What the workers below are cut short by: chaos' RuntimeError, Timeout::Error, and Ruby 3.3's
# Timeout::ExitException when it lands just outside Timeout.timeout.
CUT_SHORT = [RuntimeError, (Timeout::ExitException if defined?(Timeout::ExitException))].compact.freeze

RSpec.describe "DistMutex cohort hand-off" do
  let(:server) { FerrolockTest.redis_server }
  let(:redis) { server.redis }

  # Counts the holders inside and logs the section (see above).
  def enter_script
    <<~LUA
      local n = redis.call('INCR', KEYS[1])
      if n > 1 then redis.call('INCR', KEYS[2]) end
      local seq = redis.call('INCR', KEYS[3])
      redis.call('RPUSH', KEYS[4], ARGV[1] .. '|' .. ARGV[2] .. '|' .. ARGV[3] .. '|' .. seq)
      return seq
    LUA
  end

  # One section: counted, logged, left. Asynchronous exceptions wait until it is over (they
  # land in lock and unlock, what is under test; one inside the body would cut the counting).
  def section(raw, mutex, process, started)
    mutex.synchronize(wait_timeout: 30) do
      Thread.handle_interrupt(Object => :never) do
        raw.eval(enter_script, keys: %w[inside overlaps sections log], argv: [process, mutex.fencing_token, started])
        raw.decr("inside")
      end
    end
  end

  # The threads of a process share its client: the local line is the client's.
  def worker(client, name, process, sections, local_passes)
    raw = Redis.new(url: server.url)
    mutex = Ferrolock::DistMutex.new(name, lease: 5, client: client, local_passes: local_passes)
    sections.times { section(raw, mutex, process, raw.get("sections").to_i) }
  end

  def run_processes(name, processes:, threads:, sections:, local_passes:)
    pids = Array.new(processes) do |p|
      fork_child do
        client = Ferrolock::Client.new(url: server.url, namespace: "co")
        Array.new(threads) { Thread.new { worker(client, name, p, sections, local_passes) } }.each(&:join)
      end
    end
    expect_children_succeed(pids, timeout: 100)
    redis.call("LRANGE", "log", 0, -1).map { |line| line.split("|").map { |f| Integer(f) } }
  end

  # Longest run of consecutive sections of one process while every process still had sections
  # to run (once one is done, the others run alone).
  def longest_run(log)
    both = log.take(log.map(&:first).uniq.map { |p| log.rindex { |entry| entry[0] == p } }.min)
    both.chunk_while { |a, b| a[0] == b[0] }.map(&:size).max
  end

  it "never lets two threads in, keeps fencing tokens increasing and serves the other process within a cohort",
     time_limit: 150 do
    passes = 8
    threads = 4
    log = run_processes("stress", processes: 2, threads: threads, sections: 150, local_passes: passes)

    expect(log.size).to eq(2 * threads * 150)
    expect(redis.call("GET", "overlaps")).to be_nil
    fences = log.map { |entry| entry[1] }
    expect(fences.each_cons(2).reject { |a, b| b > a }).to eq([])
    # The cohort did pass: tokens between Redis' multiples of 16 are local passes only.
    local = fences.count { |f| (f % 16).nonzero? }
    expect(local).to be > log.size / 4
    expect(fences.map { |f| f % 16 }.max).to be <= passes
    # The other process gets in after one cohort (local_passes + 1 sections; twice that when its
    # waiter was not in line yet as the cohort ended). A waiter waits out its process's threads'
    # turns, each behind such a cohort of the other process: bounded, though loosely (it counts
    # from before the thread asked, and a thread of a loaded machine may be descheduled there).
    waited = log.map { |_, _, started, seq| seq - started - 1 }
    if ENV["COHORT_DEBUG"]
      warn "runs #{log.chunk_while { |a, b| a[0] == b[0] }.map(&:size).tally.sort.inspect}"
      at = waited.index(waited.max)
      warn log[[at - 80, 0].max..at].map { |p, f, st, seq| "#{p} #{f % 16} #{st} #{seq}" }.join("\n")
    end
    expect(waited.max).to be <= 2 * threads * (passes + 2)
    # Not a bound: a process runs on through Redis while the other has nobody in the line (its
    # threads between sections; 37 seen once on an idle machine). The waits above are the bound.
    puts "\n  longest run of one process: #{longest_run(log)} sections (a cohort is #{passes + 1})"
    expect(redis.call("EXISTS", "co:{stress}:lock")).to eq(0)
  end

  it "hands every section over through Redis with local_passes: 0", time_limit: 120 do
    log = run_processes("plain", processes: 2, threads: 3, sections: 40, local_passes: 0)
    expect(redis.call("GET", "overlaps")).to be_nil
    fences = log.map { |entry| entry[1] }
    expect(fences.each_cons(2).reject { |a, b| b > a }).to eq([])
    expect(fences.count { |f| (f % 16).nonzero? }).to eq(0)
  end

  it "stays exclusive and leaves nothing held while waiters are cut short by Timeout and Thread#raise",
     time_limit: 120 do
    raw_for = -> { Redis.new(url: server.url) }
    client = Ferrolock::Client.new(url: server.url, namespace: "co")
    stop_at = Ferrolock.monotonic + 3
    ready = Queue.new
    workers = Array.new(6) do
      Thread.new do
        # The chaos thread's exceptions land only around lock, the section and unlock (it starts
        # once every worker is masked, and stops before they do, so all land in the loop). Object,
        # not RuntimeError: Ruby 3.3's Timeout raises Timeout::ExitException (an Exception), at times
        # just after its block ended (then it is not turned into Timeout::Error).
        Thread.handle_interrupt(Object => :never) do
          raw = raw_for.call
          mutex = Ferrolock::DistMutex.new("cut", lease: 5, client: client)
          ready << true
          while Ferrolock.monotonic < stop_at
            started = raw.get("sections").to_i
            interruptibly(*CUT_SHORT) { Timeout.timeout(rand(0.0003..0.004)) { section(raw, mutex, 0, started) } }
          end
        end
      end
    end
    6.times { ready.pop }
    chaos = Thread.new do
      while Ferrolock.monotonic < stop_at - 0.3
        workers.sample.raise(RuntimeError, "chaos")
        sleep rand(0.0005..0.003)
      end
    end
    chaos.join
    workers.each(&:join)

    log = redis.call("LRANGE", "log", 0, -1).map { |line| line.split("|").map { |f| Integer(f) } }
    expect(log.size).to be > 50
    expect(redis.call("GET", "overlaps")).to be_nil
    fences = log.map { |entry| entry[1] }
    expect(fences.count { |f| (f % 16).nonzero? }).to be > 0 # local passes happened
    expect(fences.each_cons(2).reject { |a, b| b > a }).to eq([])
    # Nothing left held: a fresh lock gets in at once rather than after a 5 s lease.
    started = Ferrolock.monotonic
    Ferrolock::DistMutex.new("cut", lease: 5, client: client).synchronize(wait_timeout: 4) { nil }
    expect(Ferrolock.monotonic - started).to be < 2
  end

  # [the in-Redis holder's token, the token passed to a thread that ends holding] on a lock named name.
  # The second thread goes to Redis (nobody of the process is there yet) and is handed the lock
  # through Redis; the third waits here, and the second passes it the lock as it leaves.
  def pass_to_a_dying_thread(mutex, name)
    holder = mutex.call(name)
    holder.lock
    in_redis = Thread.new do
      m = mutex.call(name)
      m.synchronize(wait_timeout: 20) { m.fencing_token }
    end
    sleep 0.01 until redis.call("LLEN", "co:{#{name}}:waiters") == 1
    local = Thread.new do # never unlocks
      m = mutex.call(name)
      m.lock(wait_timeout: 20)
      m.fencing_token
    end
    sleep 0.3
    holder.unlock
    [in_redis.value, local.value] # the local thread ends holding: the reaper releases its hold
  end

  it "releases a hold passed to a thread that ends without unlocking", time_limit: 90 do
    client = Ferrolock::Client.new(url: server.url, namespace: "co")
    mutex = ->(name) { Ferrolock::DistMutex.new(name, lease: 1, client: client) }
    # A cohort passes only within 10 ms of its Redis acquisition: on a busy machine the second
    # thread may leave later, and the third then gets in through Redis (a token of its own). Such
    # a try shows nothing of the pass, so up to 5 tries, each on a name of its own.
    name = granted = passed = nil
    5.times do |attempt|
      name = "dies-#{attempt}"
      granted, passed = pass_to_a_dying_thread(mutex, name)
      expect(granted % 16).to eq(0)
      break unless (passed % 16).zero?
    end
    expect(passed).to eq(granted + 1)
    # Released by the reaper (within a lease), so the next holder gets in through Redis.
    started = Ferrolock.monotonic
    after = mutex.call(name)
    after.synchronize(wait_timeout: 5) { expect(after.fencing_token).to be > passed }
    expect(Ferrolock.monotonic - started).to be < 3
    expect(redis.call("EXISTS", "co:{#{name}}:lock")).to eq(0)
  end

  it "rejects local_passes out of 0..15" do
    expect { Ferrolock::DistMutex.new("x", local_passes: 16) }.to raise_error(ArgumentError, /local_passes/)
    expect { Ferrolock::DistMutex.new("x", local_passes: -1) }.to raise_error(ArgumentError, /local_passes/)
    expect { Ferrolock::DistMutex.new("x", local_passes: "8") }.to raise_error(TypeError, /local_passes/)
  end
end
