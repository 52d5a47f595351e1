# frozen_string_literal: true

require "spec_helper"
require "securerandom"
require_relative "support/testing_scenarios"

module FerrolockTest
  # Issue 26: ruby/spec's core/mutex/sleep examples hung against DistMutex once in a while, so
  # each example here (the same checks, written for DistMutex) runs this many times.
  SLEEP_RUNS = Integer(ENV.fetch("FERROLOCK_SLEEP_RUNS", "50"))
end

# DistMutex#sleep behaves like Mutex#sleep (ruby/spec core/mutex/sleep_spec.rb), every run: against
# Redis, and in ferrolock/testing's fake and disabled modes (where nothing is ever seen locked).
FerrolockTest::TestingModes::ALL.each do |mode|
  RSpec.describe "DistMutex#sleep like Mutex#sleep (#{mode})", testing_mode: mode do
    # locked? while a thread holds it (false in disabled mode: every lock is granted, none recorded).
    held = mode != :disabled

    def fresh_mutex
      Ferrolock::DistMutex.new("like-mutex-#{SecureRandom.hex(4)}")
    end

    # Runs the block SLEEP_RUNS times, each with a fresh DistMutex.
    def each_run
      FerrolockTest::SLEEP_RUNS.times { yield fresh_mutex }
    end

    # A thread that locks mutex, says so, and then runs the block; returned once it has locked.
    def locked_thread(mutex, &block)
      locked = false
      thread = Thread.new do
        mutex.lock
        locked = true
        block.call
      end
      Thread.pass until locked || !thread.alive?
      thread
    end

    # Waits (bounded) until thread looks asleep.
    def pass_until_stopped(thread)
      wait_until(timeout: 10, interval: 0) { thread.stop? }
    end

    it "raises ThreadError when not locked by the current thread", time_limit: 60 do
      each_run do |m|
        expect { m.sleep }.to raise_error(ThreadError)
        expect { m.sleep(0.01) }.to raise_error(ThreadError)
        release = Queue.new
        holder = locked_thread(m) do
          release.pop
          m.unlock
        end
        expect { m.sleep(0.01) }.to raise_error(ThreadError)
        release << true
        expect(holder.join(10)).to be(holder)
      end
    end

    it "raises ArgumentError for a negative duration, locked or not", time_limit: 60 do
      each_run do |m|
        expect { m.sleep(-0.1) }.to raise_error(ArgumentError)
        expect { m.sleep(-1) }.to raise_error(ArgumentError)
        m.synchronize do
          expect { m.sleep(-0.1) }.to raise_error(ArgumentError)
          expect { m.sleep(-1) }.to raise_error(ArgumentError)
          expect(m.owned?).to be(true)
        end
      end
    end

    it "pauses for about the duration asked, and returns nil when it passed", time_limit: 60 do
      each_run do |m|
        m.synchronize do
          slept = nil
          took = elapsed { slept = m.sleep(0.001) }
          expect(took).to be >= 0.001
          expect(took).to be < 5
          expect(slept).to be_nil
        end
      end
    end

    it "unlocks the mutex while sleeping (no longer locked once the thread looks asleep)", time_limit: 60 do
      each_run do |m|
        sleeper = locked_thread(m) do
          m.sleep
          m.unlock
        end
        pass_until_stopped(sleeper)
        expect(m.locked?).to be(false)
        sleeper.run
        expect(sleeper.join(10)).to be(sleeper)
      end
    end

    it "lets another thread take the lock once the sleeper looks asleep", time_limit: 60 do
      each_run do |m|
        sleeper = locked_thread(m) do
          m.sleep
          m.unlock
        end
        pass_until_stopped(sleeper)
        other = Ferrolock::DistMutex.new(m.name)
        expect(other.try_lock).to be(true)
        other.unlock
        sleeper.run
        expect(sleeper.join(10)).to be(sleeper)
      end
    end

    it "relocks the mutex when woken", time_limit: 60 do
      each_run do |m|
        m.lock
        m.sleep(0.001)
        expect([m.owned?, m.locked?]).to eq([true, held])
        m.unlock
      end
    end

    it "relocks the mutex when woken by an exception being raised", time_limit: 60 do
      each_run do |m|
        sleeper = locked_thread(m) do
          m.sleep
        rescue Exception # rubocop:disable Lint/RescueException -- ruby/spec raises Exception itself
          [m.owned?, m.locked?].tap { m.unlock }
        end
        pass_until_stopped(sleeper)
        sleeper.raise(Exception)
        expect(sleeper.join(10)&.value).to eq([true, held])
      end
    end

    it "returns the rounded number of seconds asleep when woken by Thread#wakeup or #run", time_limit: 60 do
      FerrolockTest::SLEEP_RUNS.times do |run|
        m = fresh_mutex
        sleeper = locked_thread(m) { [m.sleep, m.owned?].tap { m.unlock } }
        pass_until_stopped(sleeper)
        run.even? ? sleeper.wakeup : sleeper.run
        expect(sleeper.join(10)&.value).to eq([0, true])
      end
    end

    it "returns the rounded seconds when woken before a timeout", time_limit: 60 do
      each_run do |m|
        sleeper = locked_thread(m) { m.sleep(60).tap { m.unlock } }
        pass_until_stopped(sleeper)
        sleeper.wakeup
        expect(sleeper.join(10)&.value).to eq(0)
      end
    end

    it "wakes up when asked to sleep times near or equal to zero", time_limit: 120 do
      times = []
      value = 1.0
      until value.zero?
        value /= 16.0
        times << value
      end
      each_run do |m|
        m.synchronize do
          times.each { |time| expect { m.sleep(time) }.not_to raise_error }
          expect(m.owned?).to be(true)
        end
      end
    end

    # The native sleep records real wake-ups, so it sleeps the whole timeout. The testing modes sleep
    # with Mutex#sleep, which ends at any spurious wake-up while such an exception is queued (Ruby's
    # Mutex#sleep then always answers "woken"): they may end early, answering 0, never raise.
    it "sleeps on, like Mutex#sleep, when the caller's own mask defers a queued exception", time_limit: 60 do
      stop = Class.new(StandardError)
      each_run do |m|
        took = nil
        slept = :not_returned
        expect do
          m.synchronize do
            Thread.handle_interrupt(Object => :never) do
              Thread.current.raise(stop) # queued, deferred by this mask
              took = elapsed { slept = m.sleep(0.02) }
              expect(m.owned?).to be(true)
            end
          end
        end.to raise_error(stop)
        expect(slept).to(mode == :real ? be_nil : be_nil.or(eq(0)))
        expect(took).to be >= 0.02 if slept.nil?
        expect(m.locked?).to be(false)
      end
    end

    # The sleeper says when it holds the lock, so that the kill lands in m.sleep or its re-lock (stop?
    # is true in any blocking call, the first lock's too). synchronize releases as the thread ends.
    # In 2 of ~6 full-suite runs (before the sleeper said so; never alone, in thousands of runs) the
    # lock was still held right after join, and released shortly after: not understood. A hold the
    # thread recorded goes within one renewal tick (10 s), an abandoned lock call's in the background
    # at once; a hold nobody recorded would stay the whole lease (30 s) and fails here.
    it "re-locks before Thread#kill ends the thread; the hold is released as it ends", time_limit: 120 do
      late = []
      each_run do |m|
        entered = false
        sleeper = Thread.new do
          m.synchronize do
            entered = true
            m.sleep
          end
        end
        wait_until(timeout: 10, interval: 0) { entered }
        pass_until_stopped(sleeper)
        wait_until(timeout: 10) { !m.locked? } # released by m.sleep
        sleeper.kill
        expect(sleeper.join(10)).to be(sleeper)
        next unless m.locked?

        late << elapsed { wait_until(timeout: 15, interval: 0.05) { !m.locked? } }
      end
      unless late.empty?
        seconds = late.map { |s| s.round(2) }
        puts "\n  #{late.size} of #{FerrolockTest::SLEEP_RUNS} holds outlived the thread, released #{seconds} s later"
      end
    end
  end
end
