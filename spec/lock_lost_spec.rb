# frozen_string_literal: true

# A holder whose lease disappeared hears of it at the next renewal tick (:lock_lost with
# detected: :renewal, while it still runs), and again at release (LockLost, detected: :release).
RSpec.describe "the :lock_lost event at renewal" do
  let(:redis) { FerrolockTest.redis_server.redis }
  # Short leases so a renewal tick (lease / 3) comes soon; the bounds below are generous.
  let(:lease) { 0.6 }
  # A tick is lease / 3; a loaded 2-core VM may run the watchdog and the watcher late.
  let(:report_within) { (lease / 3) + 5 }

  # Collects :lock_lost payloads; `next_event` pops the next one, nil when none came in time.
  lost_events = Class.new do
    def initialize
      @queue = Queue.new
      # Only this file's locks: a lock another spec left held may be lost at any moment.
      @subscription = Ferrolock.subscribe(:lock_lost) do |_event, payload|
        @queue << payload if payload[:name].to_s.match?(/\A(lost-|flushed-|kept)/)
      end
    end

    def next_event(within)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + within
      loop do
        return @queue.pop(true) unless @queue.empty?
        return nil if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.01
      end
    end

    def drain
      items = []
      items << @queue.pop(true) until @queue.empty?
      items
    end

    def stop
      Ferrolock.unsubscribe(@subscription)
    end
  end

  around do |example|
    @events = lost_events.new
    example.run
  ensure
    @events.stop
  end

  it "fires for a DistMutex whose key was deleted, while the holder is still inside, then LockLost at release" do
    m = Ferrolock::DistMutex.new("lost-now", lease: lease)
    inside = nil
    expect do
      m.synchronize do
        fence = m.fencing_token
        redis.del("ferrolock:{lost-now}:lock")
        started = Ferrolock.monotonic
        inside = @events.next_event(report_within)
        expect(inside).to eq(primitive: :dist_mutex, name: "lost-now", fencing_token: fence, detected: :renewal)
        # Reported by the first renewal after the loss, not by a later one.
        expect(Ferrolock.monotonic - started).to be < report_within
      end
    end.to raise_error(Ferrolock::LockLost)
    expect(inside).not_to be_nil
    expect(@events.next_event(report_within)).to eq(primitive: :dist_mutex, name: "lost-now", detected: :release)
  end

  it "fires once per lost holder when FLUSHALL takes every lock at once" do
    names = Array.new(6) { |i| "flushed-#{i}" }
    ready = Queue.new
    go = Queue.new
    threads = names.map do |name|
      Thread.new do
        m = Ferrolock::DistMutex.new(name, lease: lease)
        m.synchronize do
          ready << true
          go.pop
        end
      rescue Ferrolock::LockLost
        :lost
      end
    end
    names.size.times { ready.pop }
    redis.flushall
    seen = Array.new(names.size) { @events.next_event(report_within) }
    names.size.times { go << true }
    expect(threads.map(&:value)).to all(eq(:lost))
    expect(seen.compact.map { |e| [e[:name], e[:detected]] }).to match_array(names.map { |n| [n, :renewal] })
  end

  it "fires for a ConcurrentLimiter slot and a DualLock run that vanished" do
    limiter = Ferrolock::ConcurrentLimiter.new("lost-slot", 2, lock_timeout: lease)
    expect do
      limiter.within_limit do
        redis.del("ferrolock:{lost-slot}:slots")
        expect(@events.next_event(report_within))
          .to eq(primitive: :concurrent_limiter, name: "lost-slot", detected: :renewal)
      end
    end.to raise_error(Ferrolock::LockLost)

    lock = Ferrolock::DualLock.new("lost-run", exec_ttl: lease, wait_ttl: lease)
    @events.drain
    expect do
      lock.run do
        redis.del("ferrolock:{lost-run}:exec")
        expect(@events.next_event(report_within)).to eq(primitive: :dual_lock, key: "lost-run", name: "lost-run",
                                                        detected: :renewal)
      end
    end.to raise_error(Ferrolock::LockLost)
  end

  it "stays silent while leases are renewed and kept" do
    m = Ferrolock::DistMutex.new("kept", lease: 0.3)
    limiter = Ferrolock::ConcurrentLimiter.new("kept-slot", 1, lock_timeout: 0.3)
    # About ten renewal ticks each.
    m.synchronize { limiter.within_limit { sleep 1.0 } }
    sleep 0.5
    # Only these two: the subscription is process-wide, and it is no concern of this example
    # if another example's holder is reported.
    expect(@events.drain.select { |e| %w[kept kept-slot].include?(e[:name]) }).to eq([])
  end

  it "reports losses in a forked child, whose watcher starts with its first acquisition" do
    skip "fork is not available" unless Process.respond_to?(:fork)

    # Built before the fork, as an app's constants are; the child inherits the subscription.
    m = Ferrolock::DistMutex.new("lost-in-child", lease: lease)
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      begin
        m.synchronize do
          Ferrolock.client.call("DEL", "ferrolock:{lost-in-child}:lock")
          writer.puts(@events.next_event(report_within)&.fetch(:detected).inspect)
        end
      rescue Ferrolock::LockLost
        nil
      end
      writer.close
      exit!(0)
    end
    writer.close
    line = Timeout.timeout(60) { reader.read }
    Process.wait(pid)
    expect(line.strip).to eq(":renewal")
  end
end
