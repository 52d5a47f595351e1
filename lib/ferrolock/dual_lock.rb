# frozen_string_literal: true

module Ferrolock
  # "Until and while executing" uniqueness for one key: at most one duplicate runs and at most
  # one waits; a duplicate arriving while one already waits is skipped (that waiter starts
  # after it arrived, so its trigger is still honoured: no update is lost).
  #
  #   lock = Ferrolock::DualLock.new("sync:record:42")
  #   lock.run { mirror(record) } # => true (ran) or false (skipped: another duplicate waits)
  #
  # The waiter is woken by the executor's release (no polling) and raises
  # Ferrolock::TimeoutError after wait_timeout seconds (nil: waits as long as it takes), giving up
  # its place so the next duplicate can wait. wait_lease/lease are leases renewed while the
  # waiter/executor lives: they only bound how long a crashed one keeps the key blocked.
  # (Deprecated names: max_wait for wait_timeout, wait_ttl for wait_lease, exec_ttl for lease.)
  # While a thread of this process waits for the key, the process's other duplicates are skipped
  # without asking Redis (one waiter per process per key; see ext/ferrolock-core/src/dual_lock_local.rs).
  class DualLock
    attr_reader :key, :wait_lease, :lease, :wait_timeout, :client
    alias wait_ttl wait_lease
    alias exec_ttl lease
    alias max_wait wait_timeout

    UNSET = Deprecation::UNSET
    private_constant :UNSET

    # min_replicas_acked: replicas the EXEC grant must reach before the block runs (nil: the
    # configured default).
    def initialize(key, lease: UNSET, wait_lease: UNSET, wait_timeout: UNSET, client: nil, min_replicas_acked: nil, # rubocop:disable Metrics/ParameterLists -- all keywords with defaults
                   exec_ttl: UNSET, wait_ttl: UNSET, max_wait: UNSET)
      @key = Validate.own_name!(:key, key)
      @wait_lease = Validate.seconds!(*renamed(:wait_ttl, :wait_lease, wait_ttl, wait_lease, 60))
      @lease = Validate.seconds!(*renamed(:exec_ttl, :lease, exec_ttl, lease, 60))
      given, wait_timeout = renamed(:max_wait, :wait_timeout, max_wait, wait_timeout, 30)
      @wait_timeout = nil.equal?(wait_timeout) ? nil : Validate.seconds!(given, wait_timeout, allow_zero: true)
      @client = Validate.client!(client)
      @native = Backend.build(:DualLock, @client, @key, @wait_lease, @lease,
                              Ferrolock.min_replicas_acked!(min_replicas_acked))
      # Made once, as the limiter's: every run passes them to WaitTimeout with its own values.
      @stalled = method(:stalled)
      @give_back = ->(ticket) { @native.leave(ticket) }
    end

    # Runs the block unless another duplicate already waits. Returns true when it ran, false
    # when skipped. `tags` are added to the events' payloads (the Sidekiq middleware passes
    # the job's class and jid).
    def run(tags: {})
      raise ArgumentError, "run needs a block" unless block_given?

      LockLostWatcher.ensure_started
      started = Ferrolock.monotonic
      ticket = nil
      ran = false
      begin
        # The ticket is recorded the moment it is granted (see Interrupts).
        WaitTimeout.acquire(@stalled, tags, started, keep: ->(t) { ticket = t }, give_back: @give_back) do
          @native.enter(@wait_timeout)
        end
        since = WaitTimeout.within(@stalled, tags, started) { take_turn(ticket, started, tags) }
        return skipped(tags) unless since

        yield
        ran = true
      ensure
        # Deferring interrupts means none can skip the release (on Thread#kill/raise too). A failed
        # release is logged and evented, never raised (see ReleaseFailure).
        Interrupts.release { leave(ticket, tags, ran, since) if ticket }
      end
      true
    end

    # Like #run, but returns the block's value when it ran, and `skipped` (default nil) when
    # another duplicate already waits, as DistMutex#synchronize and within_limit return theirs.
    def synchronize(skipped: nil, tags: {})
      raise ArgumentError, "synchronize needs a block" unless block_given?

      value = skipped
      run(tags: tags) { value = yield }
      value
    end

    # True when a duplicate is running now (in any process).
    def executing?
      @native.state[0]
    end

    # True when a duplicate is waiting now (in any process).
    def waiting?
      @native.state[1]
    end

    def inspect
      "#<#{self.class.name} #{@key.inspect} lease=#{@lease} wait_lease=#{@wait_lease} " \
        "wait_timeout=#{@wait_timeout.inspect}>"
    end

    private

    def renamed(old, new, old_value, new_value, default)
      Deprecation.rename("Ferrolock::DualLock.new", old, new, [old_value, new_value], default)
    end

    # Waits if needed (wait_timeout counts from started); when the ticket runs, since when
    # (Ferrolock.monotonic), false when skipped. Raises TimeoutError.
    def take_turn(ticket, started, tags)
      stage = ticket.stage
      stage = @native.wait(ticket, time_left(started)) if stage == :waiting
      case stage
      when :running
        since = Ferrolock.monotonic
        Ferrolock.instrument(:acquired, payload(tags, waited: since - started))
        since
      when :skipped
        false
      else
        raise timed_out(tags, started, "the running duplicate did not finish")
      end
    end

    def time_left(started)
      @wait_timeout && [@wait_timeout - (Ferrolock.monotonic - started), 0.0].max
    end

    # Redis stalled past wait_timeout (see WaitTimeout).
    def stalled(tags, started)
      timed_out(tags, started, "Redis did not answer")
    end

    def timed_out(tags, started, what)
      Ferrolock.instrument(:wait_timeout, payload(tags, waited: Ferrolock.monotonic - started))
      TimeoutError.new("DualLock #{@key.inspect}: #{what} within wait_timeout (#{@wait_timeout} s)")
    end

    def skipped(tags)
      Ferrolock.instrument(:skipped, payload(tags, reason: :already_waiting))
      false
    end

    # ran: the block finished (LockLost is raised then: the run was not exclusive). Otherwise (it
    # raised, or the ticket never ran) nothing raised here may replace the exception under way.
    # since: when the ticket began to run (nil: it never ran), for :released's :held.
    def leave(ticket, tags, ran, since)
      @native.leave(ticket)
      if since && Ferrolock.listening?(:released)
        Ferrolock.instrument(:released, payload(tags, held: Ferrolock.monotonic - since))
      end
    rescue LockLost
      Ferrolock.instrument(:lock_lost, payload(tags, detected: :release))
      raise if ran
    rescue Error => e
      ReleaseFailure.report(e, what: "DualLock #{@key.inspect}", finished: ran, **payload(tags))
    end

    def payload(tags, **extra)
      { primitive: :dual_lock, key: @key }.merge(tags).merge(extra)
    end
  end
end
