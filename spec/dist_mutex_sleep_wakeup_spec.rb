# frozen_string_literal: true

require "spec_helper"
require "securerandom"
require "timeout"
require_relative "support/testing_scenarios"

# Issue 26: DistMutex#sleep must never lose a wake-up that comes after the sleeper released the
# lock (Thread#wakeup / #run, ConditionVariable#signal / #broadcast, Thread#raise, Timeout), as
# Mutex#sleep never does. Each round wakes a sleeper at the worst moment: as soon as it looks
# asleep (Thread#stop?), or as soon as the lock is free again (what a signaller waits for). A
# round whose sleeper is still asleep LOST_AFTER seconds later lost its wake-up; it is counted,
# the sleeper is woken again so the example goes on, and the example fails on any loss.
#
module FerrolockTest
  module LostWakeups
    # Scales every example's rounds (the measurement of issue 26 ran 10,000).
    ROUNDS = Integer(ENV.fetch("FERROLOCK_SLEEP_ROUNDS", "1000"))
    # Far longer than a round takes on a loaded machine (a few ms): a sleeper still asleep after
    # this lost its wake-up. A lost round costs this much, so an example stops after MAX_LOST.
    LOST_AFTER = 5
    MAX_LOST = Integer(ENV.fetch("FERROLOCK_SLEEP_MAX_LOST", "3"))
  end
end

# Against Redis, and in ferrolock/testing's fake and disabled modes.
FerrolockTest::TestingModes::ALL.each do |mode|
  RSpec.describe "DistMutex#sleep wake-ups (#{mode})", testing_mode: mode do
    rounds = FerrolockTest::LostWakeups::ROUNDS

    def lost_after = FerrolockTest::LostWakeups::LOST_AFTER
    def max_lost = FerrolockTest::LostWakeups::MAX_LOST

    let(:m) { Ferrolock::DistMutex.new("sleep-wakeup-#{SecureRandom.hex(4)}") }

    # Runs `rounds` rounds; each yields and returns the threads that must end once woken. Returns
    # [lost rounds, rounds run, rounds asked]. A thread still alive lost_after seconds later lost its
    # wake-up: it is woken again (and killed if that does not help) before the next round.
    def count_lost(rounds)
      lost = 0
      run = 0
      rounds.times do
        run += 1
        threads = yield run
        stuck = threads.reject { |thread| thread.join(lost_after) }
        next if stuck.empty?

        lost += 1
        recover(stuck)
        break if lost >= max_lost
      end
      [lost, run, rounds]
    end

    def recover(threads)
      threads.each do |thread|
        3.times { thread.join(0.5) || thread.wakeup }
        thread.kill.join(5) if thread.alive?
      rescue ThreadError
        nil # ended meanwhile
      end
    end

    def expect_none_lost(counts, what)
      lost, run, rounds = counts
      expect([lost, run]).to eq([0, rounds]), "#{lost} of #{run} #{what} rounds lost their wake-up"
    end

    # A thread that takes the lock, says so, then runs the block holding it.
    def holder(ready = Queue.new, &block)
      Thread.new do
        m.synchronize do
          ready << true
          block.call
        end
      end
    end

    it "wakes every sleeper that Thread#wakeup / #run reached once it looked asleep", time_limit: 120 do
      result = count_lost(rounds) do |round|
        ready = Queue.new
        sleeper = holder(ready) { m.sleep }
        ready.pop
        Thread.pass until sleeper.stop?
        round.even? ? sleeper.wakeup : sleeper.run
        [sleeper]
      rescue ThreadError
        [] # it ended already: nothing to lose
      end
      expect_none_lost(result, "sleep/wakeup")
    end

    it "wakes every sleeper with a timeout, and returns the whole seconds slept", time_limit: 120 do
      slept = Queue.new
      result = count_lost(rounds / 2) do
        ready = Queue.new
        sleeper = holder(ready) { slept << m.sleep(60) }
        ready.pop
        Thread.pass until sleeper.stop?
        sleeper.wakeup
        [sleeper]
      end
      expect_none_lost(result, "sleep(60)/wakeup")
      expect(Array.new(slept.size) { slept.pop }.uniq).to eq([0])
    end

    it "never loses a ConditionVariable#signal sent as soon as the waiter released the lock", time_limit: 120 do
      cv = ConditionVariable.new
      result = count_lost(rounds) do
        done = false
        ready = Queue.new
        waiter = holder(ready) { cv.wait(m) until done }
        ready.pop
        m.synchronize do # granted as soon as the waiter's release reached Redis
          done = true
          cv.signal
        end
        [waiter]
      end
      expect_none_lost(result, "ConditionVariable wait/signal")
    end

    it "never loses a ConditionVariable#broadcast to several waiters", time_limit: 120 do
      cv = ConditionVariable.new
      result = count_lost(rounds / 4) do
        done = false
        ready = Queue.new
        waiters = Array.new(3) { holder(ready) { cv.wait(m) until done } }
        3.times { ready.pop }
        m.synchronize do
          done = true
          cv.broadcast
        end
        waiters
      end
      expect_none_lost(result, "ConditionVariable wait/broadcast (3 waiters)")
    end

    it "never loses a wake-up of a sleep inside Timeout.timeout", time_limit: 120 do
      result = count_lost(rounds / 2) do
        ready = Queue.new
        sleeper = holder(ready) { Timeout.timeout(60) { m.sleep } }
        ready.pop
        Thread.pass until sleeper.stop?
        sleeper.wakeup
        [sleeper]
      end
      expect_none_lost(result, "Timeout.timeout { sleep }/wakeup")
    end

    it "ends every sleep by Timeout, the lock held again in the rescue", time_limit: 120 do
      states = Queue.new
      result = count_lost(rounds / 4) do
        # Timeouts of 0.1 to 3 ms fire anywhere from before the release to during the wait.
        limit = 0.0001 + (rand * 0.003)
        sleeper = holder do
          Timeout.timeout(limit) { m.sleep }
        rescue Timeout::Error
          states << m.owned?
        end
        [sleeper]
      end
      expect_none_lost(result, "Timeout.timeout(0.1..3 ms) { sleep }")
      expect(Array.new(states.size) { states.pop }.uniq).to eq([true])
    end

    it "never loses a Thread#raise or #kill sent once the sleeper looked asleep", time_limit: 120 do
      stop = Class.new(StandardError)
      states = Queue.new
      result = count_lost(rounds / 2) do |round|
        ready = Queue.new
        sleeper = holder(ready) do
          m.sleep
        rescue stop
          states << m.owned?
        end
        ready.pop
        Thread.pass until sleeper.stop?
        round.even? ? sleeper.raise(stop) : sleeper.kill
        [sleeper]
      end
      expect_none_lost(result, "sleep/Thread#raise or #kill")
      expect(Array.new(states.size) { states.pop }.uniq).to eq([true])
      expect(m.locked?).to be(false) # killed sleepers re-locked, then synchronize released
    end

    # Whether thread waits in DistMutex#sleep's re-lock: in the native lock (its first frame), or
    # in the fake one's wait for the store.
    def waits_in_relock?(thread, mode)
      frames = thread.backtrace_locations || []
      return frames.first&.base_label == "lock" if mode == :real

      thread.stop? && frames.any? { |f| f.base_label == "lock" && f.path.end_with?("testing/fake/dist_mutex.rb") }
    end

    # (Not in disabled mode: every lock is granted, so the re-lock never waits.)
    it "re-locks before a Thread#raise or #kill that lands while the re-lock waits", time_limit: 120,
                                                                                     skip: mode == :disabled do
      stop = Class.new(StandardError)
      states = Queue.new
      other = Ferrolock::DistMutex.new(m.name)
      result = count_lost(rounds / 10) do |round|
        ready = Queue.new
        sleeper = holder(ready) do
          m.sleep
        rescue stop
          states << m.owned?
        end
        ready.pop
        other.lock # waits for the sleeper's release
        Thread.pass until sleeper.stop?
        sleeper.wakeup # its re-lock now waits for `other`
        # base_label: Ruby 3.4's label names the class too ("Ferrolock::Native::DistMutex#lock").
        wait_until(timeout: lost_after) { waits_in_relock?(sleeper, mode) }
        round.even? ? sleeper.raise(stop) : sleeper.kill
        other.unlock
        [sleeper]
      end
      expect_none_lost(result, "re-lock/Thread#raise or #kill")
      expect(Array.new(states.size) { states.pop }.uniq).to eq([true])
      expect(m.locked?).to be(false)
    end
  end
end
