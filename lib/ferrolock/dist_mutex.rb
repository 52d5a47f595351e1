# frozen_string_literal: true

require_relative "dist_mutex/ownership"
require_relative "dist_mutex/owners"
require_relative "dist_mutex/reaper"
require_relative "dist_mutex/holding"

module Ferrolock
  # A mutex shared by threads, processes and hosts through Redis, with Ruby Mutex's API and
  # owner rules (the owner is the current fiber, as with Ruby 3's Mutex).
  #
  #   m = Ferrolock::DistMutex.new("report:42")
  #   m.synchronize { build_report }
  #
  # expire: nil          released when the block ends; the lease (lease:, seconds) is renewed
  #                      while held, so it only bounds how long a crashed holder blocks others.
  # expire: n            as above with n as the lease.
  # expire: n, auto_release: false
  #                      frees itself n seconds after it was taken, not when the block ends:
  #                      holders START at least n seconds apart (a rate spacer). unlock is a no-op.
  class DistMutex
    include Holding

    attr_reader :name, :client

    # Local passes a cohort may make (0..15): an unlock that finds another thread of this process
    # waiting for the name passes the lock to it without Redis, at most this many times in a row
    # (and within 10 ms of the Redis acquisition); then the lock goes back through Redis, whose
    # FIFO line serves other processes. 0: every hand-off goes through Redis.
    LOCAL_PASSES = Cohort::LOCAL_PASSES
    MAX_LOCAL_PASSES = Cohort::MAX_LOCAL_PASSES

    # min_replicas_acked: replicas each grant must reach before lock returns (nil: the
    # configured default, see Configuration#min_replicas_acked). local_passes: see LOCAL_PASSES.
    # fair: false: this process keeps the lock among its threads up to 50 ms (doc/BEHAVIOUR.md).
    # fencing: false: holds get no fencing token (#fencing_token is nil), and a free lock costs
    # Redis 5 commands per lock + unlock instead of 7 (needs auto_release).
    def initialize(name, expire: nil, auto_release: true, lease: 30, client: nil, min_replicas_acked: nil, # rubocop:disable Metrics/ParameterLists -- all keywords with defaults
                   local_passes: LOCAL_PASSES, fair: true, fencing: true)
      @name = Validate.own_name!(:name, name)
      expire = Validate.seconds!(:expire, expire) unless nil.equal?(expire) # (BasicObject-safe: no nil?)
      lease = Validate.seconds!(:lease, lease)
      @auto_release = Validate.boolean!(:auto_release, auto_release)
      fencing = Validate.boolean!(:fencing, fencing)
      expiry_only!(expire, fencing) unless auto_release
      @client = Validate.client!(client)
      local_passes = Cohort.local_passes!(local_passes)

      @native = Backend.build(:DistMutex, @client, @name, expire, auto_release, lease,
                              Ferrolock.min_replicas_acked!(min_replicas_acked), local_passes,
                              Validate.boolean!(:fair, fair), fencing)
      # Holds are recorded process-wide (Owners) under the lock's identity, so other DistMutex
      # objects of the same lock see them; a hold whose owner ends is released by this process's
      # next call on the lock, or at the reaper's next tick.
      @key = Owners.key(@client.redacted_url, @client.namespace, @name)
      @tick = [(expire || lease) / 3.0, Reaper::LONGEST_TICK].min
      @history = History::Counter.new(:dist_mutex, @name)
      bind_callbacks
    end

    # Waits for the lock (at most wait_timeout seconds: Ferrolock::TimeoutError after that).
    # timeout: is wait_timeout's deprecated name.
    def lock(wait_timeout: Deprecation::UNSET, timeout: Deprecation::UNSET)
      given, wait_timeout = wait_timeout_given("Ferrolock::DistMutex#lock", wait_timeout, timeout)
      lock_as_current(wait_timeout, given)
    end

    # Takes the lock if free; never waits for a holder (only for a release a #sleep of this
    # process has in flight, as #locked? does: a thread seen asleep holds nothing).
    def try_lock
      return false if owned?

      Reaper.release_ended(@key)

      LockLostWatcher.ensure_started
      hold = Interrupts.acquire(keep: ->(h) { remember(h) if h }, give_back: ->(h) { @native.unlock(h) if h }) do
        @native.try_lock
      end
      !hold.nil?
    end

    # Releases the lock. Raises ThreadError unless the current fiber holds it, and
    # Ferrolock::LockLost when the lease was lost meanwhile (the section was not exclusive). Like
    # Mutex#unlock, it raises when the release fails (ConnectionError: Redis unreachable); the hold
    # is gone then, the lease no longer renewed and the release retried in the background.
    def unlock
      released = Interrupts.release { release_own_hold }
      raise ThreadError, "Attempt to unlock a mutex which is not locked by this thread" unless released

      self
    end

    # Runs the block holding the lock and returns its value. A release that fails once the block is
    # over is logged and evented (:release_failed), never raised (see ReleaseFailure); a block that
    # raised keeps its exception (a lost lease is then only evented). LockLost after a block that
    # finished is raised: the section was not exclusive. timeout: is wait_timeout's deprecated name.
    def synchronize(wait_timeout: Deprecation::UNSET, timeout: Deprecation::UNSET)
      given, wait_timeout = wait_timeout_given("Ferrolock::DistMutex#synchronize", wait_timeout, timeout)
      raise ThreadError, "must be called with a block" unless block_given?

      finished = false
      begin
        lock_as_current(wait_timeout, given)
        value = yield
        finished = true
        value
      ensure
        # Also releases a hold recorded just before an exception landed as lock returned;
        # deferred interrupts cannot skip the release.
        Interrupts.release { release_after_block(finished) }
      end
    end

    # As Ruby's Mutex#sleep: releases the lock, sleeps until timeout seconds passed or the thread
    # is woken (Thread#wakeup / #run, ConditionVariable#signal), takes the lock again and returns
    # the whole seconds slept, or nil when the timeout passed. The wake-up is local to this
    # process; another process's unlock does not end the sleep. If an exception (Timeout, say)
    # ends the sleep, the lock is taken again before it propagates, as with Mutex.
    def sleep(timeout = nil)
      timeout = Validate.seconds!(:timeout, timeout, allow_zero: true) unless nil.equal?(timeout)
      # An exception queued now that the caller's mask lets through ends the sleep before it
      # starts (as Mutex#sleep's would); one still queued is deferred by that mask on purpose.
      Native.check_interrupts
      deferred = Thread.pending_interrupt?
      hold = nil
      woken = false
      started = Ferrolock.monotonic
      begin
        # The release and the wait are one native call, so that no wake-up sent once the lock is
        # free can land between them; exceptions wait for the release (see Interrupts.release)
        # and are raised as the block ends, ending the sleep.
        woken = Interrupts.release do
          ownership = take_own_hold!
          hold = ownership.hold
          release_and_sleep(ownership, timeout, deferred, started)
        end
        slept = Ferrolock.monotonic - started
      rescue LockLost
        Ferrolock.instrument(:lock_lost, primitive: :dist_mutex, name: @name, detected: :release)
        raise
      ensure
        # Like Mutex#sleep, re-locks even when an exception ends the sleep or lands meanwhile
        # (not when the release failed: the lock was not ours any more).
        Thread.handle_interrupt(Object => :never) { lock } if hold&.released_by_sleep?
      end
      woken ? slept.round : nil
    end

    # True when anyone (any thread, process or host) holds the lock. A hold of this process
    # whose owner ended is released first (Ruby's Mutex is unlocked at thread end).
    def locked?
      Reaper.release_ended(@key)
      @native.locked?
    end

    # True when the current fiber holds the lock.
    def owned?
      !Owners.current(@native, @key).nil?
    end

    # A number that grows with every acquisition of this name, while owned; else nil (always nil
    # with fencing: false). Pass it to storage that must reject writes from a holder that lost the lock.
    def fencing_token
      Owners.current(@native, @key)&.hold&.fencing_token
    end

    def inspect
      "#<#{self.class.name} #{@name.inspect} auto_release=#{@auto_release}>"
    end

    private

    # An expiry-only lock (auto_release: false) frees itself expire seconds after its fencing
    # token's Redis time: it needs both.
    def expiry_only!(expire, fencing)
      raise ArgumentError, "auto_release: false needs expire: (the lock would never be released)" if expire.nil?
      return if fencing

      raise ArgumentError,
            "fencing: false needs auto_release (an expiry-only lock's spacing counts from its fencing token)"
    end

    NO_WAIT_TIMEOUT = [:wait_timeout, nil].freeze
    private_constant :NO_WAIT_TIMEOUT

    # [the keyword the caller wrote, the wait] for lock and synchronize, whose wait_timeout: was
    # once timeout:. No array is made on the common call, which gives neither.
    def wait_timeout_given(owner, wait_timeout, timeout)
      if Deprecation::UNSET.equal?(timeout)
        return NO_WAIT_TIMEOUT if Deprecation::UNSET.equal?(wait_timeout)

        return [:wait_timeout, wait_timeout]
      end
      Deprecation.rename(owner, :timeout, :wait_timeout, [timeout, wait_timeout], nil)
    end

    # lock for the calling fiber (ThreadError when it, or another fiber of its thread, holds it).
    # `given`: the keyword the caller wrote (:wait_timeout, or the deprecated :timeout), for errors.
    # This is every lock's path: kept short (a request sent more than ~2 µs after the previous
    # reply finds Redis asleep and costs ~10 µs more; see doc/BENCHMARKS.md).
    def lock_as_current(wait_timeout, given)
      check_local_owners

      LockLostWatcher.ensure_started
      audience = Ferrolock.audience(:acquired)
      # History alone listens: the core times the wait and counts the grant in the tally (no Ruby per
      # event). Else a listener gets a payload, timed on Ferrolock.monotonic's clock, read in place
      # here and below: a Ruby call less each on this path (doc/BENCHMARKS.md, history).
      tally = @history.tally_when(audience)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC) if audience == :all
      hold = if nil.equal?(wait_timeout)
               # Granted and recorded, or interrupted holding nothing (see Interrupts).
               Interrupts.acquire(keep: @remember, give_back: @give_back) { @native.lock(nil, tally) }
             else
               wait_timeout = Validate.seconds!(given, wait_timeout, allow_zero: true)
               WaitTimeout.acquire(@stalled, wait_timeout, keep: @remember, give_back: @give_back) do
                 @native.lock(wait_timeout, tally)
               end
             end
      if started
        # When hold was granted: remember's reading for its Ownership (one clock read for the wait and
        # the hold), or a fresh one when another grant was remembered since (this one's lease was lost
        # or expired meanwhile). @granted is read once and an Ownership never changes, so no thread
        # switch can mix two grants.
        granted = @granted
        now = granted && granted.hold.equal?(hold) ? granted.since : Process.clock_gettime(Process::CLOCK_MONOTONIC)
        Ferrolock.instrument(:acquired, { primitive: :dist_mutex, name: @name, waited: now - started })
      end
      self
    end

    # Made once: every lock passes them to Interrupts.acquire (and @stalled, with its wait_timeout, to
    # WaitTimeout.acquire): no closure per call on the hot path.
    def bind_callbacks
      @remember = method(:remember)
      @give_back = method(:give_back)
      @stalled = method(:stalled)
    end

    # Redis stalled past wait_timeout (see WaitTimeout).
    def stalled(wait_timeout)
      TimeoutError.new("DistMutex #{@name.inspect}: Redis did not answer within wait_timeout (#{wait_timeout} s)")
    end
  end
end
