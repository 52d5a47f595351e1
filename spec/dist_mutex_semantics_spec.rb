# frozen_string_literal: true

require "logger"
require "stringio"
require "timeout"

module FerrolockTest
  # The least a Fiber scheduler needs, for fibers that never wait on IO: runs each at once.
  class InlineScheduler
    def fiber(&block)
      Fiber.new(blocking: false, &block).tap(&:resume)
    end

    def block(_blocker, _timeout = nil) = nil
    def unblock(_blocker, _fiber) = nil
    def kernel_sleep(*) = nil
    def io_wait(*) = nil
    def close = nil
  end
end

# Ruby Mutex semantics a distributed mutex can have: release on owner death, #sleep (and so
# ConditionVariable and Timeout), the same-thread fiber deadlock error. Fork safety of all that.
RSpec.describe Ferrolock::DistMutex do
  let(:redis) { FerrolockTest.redis_server.redis }
  # The reaper's warnings, kept out of the spec output.
  let(:log) { StringIO.new }

  around do |example|
    previous = Ferrolock.config.logger
    Ferrolock.config.logger = Logger.new(log)
    example.run
  ensure
    Ferrolock.config.logger = previous
  end

  # lease 0.6 s: the reaper looks every 0.2 s (lease/3).
  let(:lease) { 0.6 }
  let(:tick) { lease / 3 }
  # Generous: a loaded 2-core CI VM may run the reaper thread late.
  let(:margin) { 0.8 }

  # FERROLOCK_SPEC_FAIR=false runs these in unfair mode (fair: false, issue 43);
  # FERROLOCK_SPEC_FENCING=false without fencing tokens (fencing: false).
  def mutex(name, **options)
    described_class.new(name, lease: lease, fair: ENV.fetch("FERROLOCK_SPEC_FAIR", "true") != "false",
                              fencing: fencing?, **options)
  end

  def fencing?
    ENV.fetch("FERROLOCK_SPEC_FENCING", "true") != "false"
  end

  def lock_key(name)
    "ferrolock:{#{name}}:lock"
  end

  # The :owner_gone events for name while the block runs.
  def owner_gone_events(name)
    events = Queue.new
    subscription = Ferrolock.subscribe(:owner_gone) { |_event, payload| events << payload if payload[:name] == name }
    yield events
  ensure
    Ferrolock.unsubscribe(subscription)
  end

  # Seconds from now until the lock key is gone (fails after 5 s: a leaked lock is renewed forever).
  def seconds_until_released(name)
    started = monotonic
    wait_until(timeout: 5) { !redis.exists?(lock_key(name)) }
    monotonic - started
  end

  def another_process_takes(name)
    run_ruby!(%(require "ferrolock"; print Ferrolock::DistMutex.new(#{name.inspect}).try_lock))
  end

  # True once thread is inside Kernel#sleep, or inside DistMutex#sleep's release and wait (status
  # "sleep" alone also covers a Redis call made while locking). base_label, as Ruby 3.4's label names the
  # class too ("Kernel#sleep", "Ferrolock::Native::DistMutex#release_and_sleep").
  def in_kernel_sleep?(thread)
    thread.status == "sleep" && %w[sleep release_and_sleep].include?(thread.backtrace_locations&.first&.base_label)
  end

  describe "an owner that ends without unlocking" do
    it "is released within a tick when its thread is killed outside synchronize" do
      owner_gone_events("killed") do |events|
        m = mutex("killed")
        locked = Queue.new
        thread = Thread.new do
          m.lock
          locked << true
          Kernel.sleep
        end
        locked.pop
        thread.kill.join
        expect(seconds_until_released("killed")).to be < tick + margin
        # Released by its token while still ours (lost: false): not an expiry.
        expect(events.pop).to include(primitive: :dist_mutex, name: "killed", lost: false)
        expect(another_process_takes("killed")).to eq("true")
      end
    end

    it "is released within a tick when its thread returns holding it" do
      m = mutex("returned")
      Thread.new { m.lock }.join
      expect(seconds_until_released("returned")).to be < tick + margin
      expected = /DistMutex "returned" released: its owner #<Thread:.*dead> ended without unlocking/
      expect(wait_until { log.string[expected] }).to be_truthy
      expect(another_process_takes("returned")).to eq("true")
    end

    it "is released within a tick when its fiber finishes holding it" do
      owner_gone_events("fiber") do |events|
        m = mutex("fiber")
        Fiber.new { m.lock }.resume
        expect(m.owned?).to be(false) # the finished fiber owned it, not this one
        expect(seconds_until_released("fiber")).to be < tick + margin
        expect(events.pop).to include(name: "fiber", lost: false)
        expect(m.try_lock).to be(true)
        m.unlock
      end
    end

    it "is released at once by a lock of that name in this process (no waiting for the reaper)" do
      slow_reaper = described_class.new("ended", lease: 30) # the reaper would look after 10 s
      Fiber.new { slow_reaper.lock }.resume
      took = elapsed { slow_reaper.lock(timeout: 5) }
      expect(took).to be < 2
      expect(log.string).to include('DistMutex "ended" released')
      slow_reaper.unlock
    end

    it "keeps the holds of live threads and suspended fibers" do
      events = Queue.new
      # Only these two names: another example's holder may be reported in the meantime.
      subscription = Ferrolock.subscribe(:owner_gone) do |_event, payload|
        events << payload if %w[live-thread live-fiber].include?(payload[:name])
      end
      begin
        by_thread = mutex("live-thread")
        by_fiber = mutex("live-fiber")
        locked = Queue.new
        done = Queue.new
        thread = Thread.new do
          by_thread.lock
          locked << true
          done.pop
          by_thread.unlock
        end
        fiber = Fiber.new do
          by_fiber.lock
          Fiber.yield
          by_fiber.unlock
        end
        fiber.resume
        locked.pop
        Kernel.sleep(5 * tick)
        expect(redis.exists?(lock_key("live-thread"))).to be(true)
        expect(redis.exists?(lock_key("live-fiber"))).to be(true)
        expect(events).to be_empty
        fiber.resume
        done << true
        thread.join
        expect([by_fiber.locked?, by_thread.locked?]).to eq([false, false])
      ensure
        Ferrolock.unsubscribe(subscription)
      end
    end

    it "keeps nothing once unlocked (DistMutex objects are not retained)" do
      threads = Array.new(4) do |i|
        Thread.new { 50.times { described_class.new("free-#{i % 2}").synchronize { nil } } }
      end
      threads.each(&:join)
      recorded = described_class::Owners.instance_variable_get(:@by_key).keys.map { |key| key.to_s.split("\n").last }
      expect(recorded & %w[free-0 free-1]).to be_empty
    end
  end

  describe "fork" do
    # The child runs the block and exits; its status says whether the block returned true.
    def in_child
      pid = fork do
        ok = begin
          yield
        rescue Exception # rubocop:disable Lint/RescueException
          false
        end
        exit!(ok ? 0 : 1)
      end
      Process.wait2(pid).last
    end

    it "never releases the parent's holds in the child, though the parent's threads look dead there" do
      by_main = mutex("parent-main").tap(&:lock)
      by_thread = mutex("parent-thread")
      locked = Queue.new
      holder = Thread.new do
        by_thread.lock
        locked << true
        Kernel.sleep
      end
      locked.pop
      tokens = [redis.get(lock_key("parent-main")), redis.get(lock_key("parent-thread"))]

      status = in_child do
        not_owned = !by_main.owned? && by_main.fencing_token.nil?
        refused = begin
          by_main.unlock
          false
        rescue ThreadError
          true
        end
        # A hold of the child's own starts the child's reaper; let it look several times.
        own = mutex("child-own").tap(&:lock)
        Kernel.sleep(5 * tick)
        own.unlock
        not_owned && refused
      end

      expect(status.success?).to be(true)
      expect([redis.get(lock_key("parent-main")), redis.get(lock_key("parent-thread"))]).to eq(tokens)
      expect(by_main.owned?).to be(true)
      by_main.unlock
      holder.kill.join
      expect(seconds_until_released("parent-thread")).to be < tick + margin
    end

    it "does not release the parent's lock when the child leaves synchronize" do
      m = mutex("fork-sync")
      pid = nil
      begin
        m.synchronize do
          token = redis.get(lock_key("fork-sync"))
          pid = fork
          next unless pid # the child leaves the block at once, running synchronize's ensure

          _, status = Process.wait2(pid)
          expect(status.success?).to be(true)
          expect(redis.get(lock_key("fork-sync"))).to eq(token)
          expect(m.owned?).to be(true)
        end
      ensure
        exit!($ERROR_INFO.nil? && !m.owned? && m.locked? ? 0 : 1) if pid.nil?
      end
    end
  end

  describe "#sleep" do
    it "releases the lock, lets another holder in, re-locks and returns nil after the timeout" do
      m = mutex("nap")
      got_in = Queue.new
      ready = Queue.new
      m.synchronize do
        before = m.fencing_token
        other = Thread.new do
          ready << true
          mutex("nap").synchronize(timeout: 10) { got_in << true }
        end
        ready.pop
        slept = nil
        took = elapsed { slept = m.sleep(1.0) }
        expect(slept).to be_nil
        expect(took).to be >= 1.0
        expect(got_in.size).to eq(1) # only possible while the sleep released it
        expect([m.owned?, redis.exists?(lock_key("nap"))]).to eq([true, true])
        if fencing?
          expect(m.fencing_token).to be > before
        else
          expect([before, m.fencing_token]).to eq([nil, nil])
        end
        other.join
      end
    end

    it "ends early on Thread#wakeup and returns the whole seconds slept" do
      m = mutex("wake")
      sleeper = Thread.new { m.synchronize { [m.sleep(60), m.owned?] } }
      wait_until(timeout: 10) { in_kernel_sleep?(sleeper) }
      took = elapsed do
        sleeper.wakeup
        sleeper.join(10)
      end
      expect(sleeper.value).to eq([0, true])
      expect(took).to be < 5
      expect(m.locked?).to be(false)
    end

    it "sleeps until woken when given no timeout" do
      m = mutex("forever")
      sleeper = Thread.new { m.synchronize { m.sleep } }
      wait_until(timeout: 10) { in_kernel_sleep?(sleeper) }
      expect(m.locked?).to be(false)
      sleeper.run
      expect(sleeper.join(10)&.value).to eq(0)
    end

    it "raises ArgumentError for a negative timeout and ThreadError when not owned" do
      m = mutex("bad-sleep")
      m.synchronize do
        expect { m.sleep(-1) }.to raise_error(ArgumentError, /timeout/)
        expect { m.sleep("1") }.to raise_error(TypeError, /timeout/)
        expect(m.owned?).to be(true)
        expect { mutex("bad-sleep").sleep(0.01) }.to raise_error(ThreadError)
      end
      expect { m.sleep(0.01) }.to raise_error(ThreadError)
      expect(m.locked?).to be(false)
    end

    it "raises LockLost, without the lock, when the lease was lost before it" do
      m = mutex("lost-nap")
      m.synchronize do
        redis.del(lock_key("lost-nap"))
        expect { m.sleep(0.01) }.to raise_error(Ferrolock::LockLost)
        expect(m.owned?).to be(false)
      end
    end

    it "makes ConditionVariable#wait work, woken by a signal from another thread" do
      m = mutex("cv")
      cv = ConditionVariable.new
      ready = false
      waiter = Thread.new do
        m.synchronize do
          cv.wait(m) until ready
          m.owned?
        end
      end
      wait_until(timeout: 10) { in_kernel_sleep?(waiter) }
      m.synchronize do
        ready = true
        cv.signal
      end
      expect(waiter.join(10)&.value).to be(true)
    end

    it "makes ConditionVariable#wait with a timeout return holding the lock" do
      m = mutex("cv-timeout")
      result = m.synchronize do
        took = elapsed { ConditionVariable.new.wait(m, 0.2) }
        [took >= 0.2, m.owned?]
      end
      expect(result).to eq([true, true])
    end

    it "is ended by Timeout, which propagates with the lock held again, then released by synchronize" do
      m = mutex("timeout")
      state_in_rescue = nil
      m.synchronize do
        Timeout.timeout(0.2) { m.sleep }
      rescue Timeout::Error
        state_in_rescue = [m.owned?, redis.exists?(lock_key("timeout"))]
      end
      expect(state_in_rescue).to eq([true, true])
      expect { Timeout.timeout(0.2) { m.synchronize { m.sleep } } }.to raise_error(Timeout::Error)
      expect([m.owned?, m.locked?]).to eq([false, false])
    end

    it "re-locks even when Thread#raise lands while the re-lock waits (like Mutex#sleep)" do
      m = mutex("relock")
      other = mutex("relock")
      stop = Class.new(StandardError)
      seen = Queue.new
      locked = Queue.new
      sleeper = Thread.new do
        m.lock
        locked << true
        m.sleep(0.05)
      rescue stop
        seen << [m.owned?, redis.exists?(lock_key("relock"))]
        m.unlock
      end
      sleeper.report_on_exception = false
      Timeout.timeout(10) { locked.pop }
      wait_until(timeout: 5) { other.try_lock } # taken while the sleeper sleeps
      Kernel.sleep(0.15) # the sleeper's 0.05 s are over: its re-lock now waits for `other`
      sleeper.raise(stop)
      Kernel.sleep(0.2)
      expect(seen).to be_empty # the exception waits for the re-lock
      other.unlock
      expect(Timeout.timeout(10) { seen.pop }).to eq([true, true])
      sleeper.join(5)
      expect(m.locked?).to be(false)
    end
  end

  describe "two fibers of one thread" do
    # Ruby 3's Mutex raises this for a lock its own thread's sibling fiber holds; the expectation is
    # written out rather than read off a plain Mutex, whose behaviour there changed between patch
    # levels (3.1.2 waits forever instead of raising).
    let(:message) { "deadlock; lock already owned by another fiber belonging to the same thread" }

    it "raises Mutex's ThreadError instead of waiting forever for a sibling fiber" do
      m = mutex("fibers")
      holder = Fiber.new do
        m.lock
        Fiber.yield
        m.unlock
      end
      holder.resume
      expect { m.lock }.to raise_error(ThreadError, message)
      expect { m.synchronize { nil } }.to raise_error(ThreadError, message)
      # Another object of the same name, even through another client of the same server.
      expect { mutex("fibers").lock(timeout: 5) }.to raise_error(ThreadError, message)
      same_server = Ferrolock::Client.new
      expect { described_class.new("fibers", client: same_server).lock }.to raise_error(ThreadError, message)
      expect(mutex("fibers").try_lock).to be(false)
      # Another thread simply waits.
      waiter = Thread.new { mutex("fibers").lock(timeout: 0.1) }
      waiter.report_on_exception = false
      expect { waiter.join }.to raise_error(Ferrolock::TimeoutError)
      holder.resume
      expect(m.try_lock).to be(true)
      m.unlock
    end

    it "raises it under a Fiber.scheduler too: the waiting lock would block the sibling's thread" do
      m = mutex("scheduled")
      outcome = Thread.new do
        Fiber.set_scheduler(FerrolockTest::InlineScheduler.new)
        holder = Fiber.schedule do
          m.lock
          Fiber.yield
          m.unlock
        end
        error = begin
          Fiber.schedule { m.lock(timeout: 5) }
          nil
        rescue ThreadError => e
          e.message
        end
        holder.resume
        [error, m.locked?]
      end.value
      expect(outcome).to eq([message, false])
    end
  end
end
