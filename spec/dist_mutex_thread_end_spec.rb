# frozen_string_literal: true

require "logger"
require "stringio"
require_relative "support/testing_scenarios"

# Ruby's Mutex is unlocked as its owner thread ends. A DistMutex held by a thread that ended is
# released before any call of this process can see it held, and within about a second for other
# processes (not after the lease, which bounds only crashed processes). ruby/spec
# core/mutex/locked_spec.rb "returns the status of the lock" is the first example. The examples
# within this process run in ferrolock/testing's fake and disabled modes too.
FerrolockTest::TestingModes::ALL.each do |mode|
  RSpec.describe Ferrolock::DistMutex, "held by a thread that ended (#{mode})", testing_mode: mode do
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

    # The default lease (30 s): with it the reaper used to look only every 10 s.
    def lock_key(name)
      "ferrolock:{#{name}}:lock"
    end

    # A thread that locks each mutex and ends; joined.
    def thread_ends_holding(*mutexes)
      Thread.new { mutexes.each(&:lock) }.join
    end

    it "is not locked? right after join (ruby/spec core/mutex/locked_spec.rb)", time_limit: 20 do
      m1 = described_class.new("thread-end-1")
      m2 = described_class.new("thread-end-2")
      thread_ends_holding(m1, m2)
      expect(m1.locked?).to be(false)
      expect(m2.locked?).to be(false)
    end

    # try_lock never waits, so it finds the lock free only if it (or the reaper, had it looked
    # first) released it. Each hold is released once, by this thread or the reaper.
    it "is free for try_lock and lock right after join, through any DistMutex of the name", time_limit: 20 do
      released_on = {}
      subscription = Ferrolock.subscribe(:owner_gone) do |_, payload|
        # (Only this example's: a hold another spec left to the reaper may be released meanwhile.)
        released_on[payload[:name]] = Thread.current if payload[:name].start_with?("thread-end-")
      end
      thread_ends_holding(described_class.new("thread-end-try"), described_class.new("thread-end-lock"))
      other = described_class.new("thread-end-try")
      expect(other.try_lock).to be(true)
      other.unlock
      expect(described_class.new("thread-end-lock").synchronize(wait_timeout: 5) { :ran }).to eq(:ran)
      expect(released_on.keys).to contain_exactly("thread-end-try", "thread-end-lock")
      expect(released_on.values.map { |thread| thread == Thread.current || thread.name == "ferrolock-reaper" })
        .to eq([true, true])
      expect(log.string).to include('DistMutex "thread-end-try" released')
    ensure
      Ferrolock.unsubscribe(subscription) if subscription
    end

    it "is not locked? while another thread of this process is still releasing it", time_limit: 20 do
      # Many observers at once: whichever takes the ended hold out releases it, the others wait
      # for that release (it is announced), so none of them sees the lock held.
      names = Array.new(4) { |i| "thread-end-race-#{i}" }
      mutexes = names.map { |name| described_class.new(name) }
      thread_ends_holding(*mutexes)
      seen = Array.new(8) { |i| Thread.new { mutexes[i % 4].locked? } }.map(&:value)
      expect(seen).to all(be(false))
    end

    # Redis' own, so only against it.
    next unless mode == :real

    # The reaper looks every LONGEST_TICK (0.5 s); the bound is 10 of them, far from what a missed
    # look costs (the lease, 30 s, or the old tick, lease/3), so a loaded machine does not fail it.
    it "is free for another process within about a second, not after the lease", time_limit: 30 do
      m = described_class.new("thread-end-other") # lease 30 s
      thread_ends_holding(m)
      # No call of this process touches the lock: only the reaper can free it.
      started = monotonic
      wait_until(timeout: 10, what: "the ended thread's lock released") { !redis.exists?(lock_key("thread-end-other")) }
      expect(monotonic - started).to be < (10 * Ferrolock::DistMutex::Reaper::LONGEST_TICK)
      out = run_ruby!(%(require "ferrolock"; print Ferrolock::DistMutex.new("thread-end-other").try_lock))
      expect(out).to eq("true")
    end
  end
end
