# frozen_string_literal: true

require_relative "concurrent_limiter/local_limits"

module Ferrolock
  # At most `count` blocks run at once, across threads, processes and hosts (Sidekiq Enterprise's
  # concurrent limiter API). Create it once (a constant) and reuse it; it is thread-safe.
  #
  #   ERP = Ferrolock::ConcurrentLimiter.new("erp", 5, wait_timeout: 5, lease: 30)
  #   ERP.within_limit { call_erp }   # raises Ferrolock::OverLimit if no slot freed in 5 s
  #
  # A slot is a lease renewed while its block runs, so a block may run far past lease
  # without letting an extra block in; lease (deprecated name: lock_timeout) only bounds how long a crashed process
  # (kill -9) keeps its slots.
  class ConcurrentLimiter
    attr_reader :name, :count, :wait_timeout, :lease, :client
    alias lock_timeout lease

    # local_passes' default: the most allowed (63: a slot has no fencing tokens, whose block bounds
    # DistMutex's passes to 15; its default is Cohort::LOCAL_PASSES, 8). A waiter of another process
    # takes the first of `count` slots whose run of passes ends (each run within 10 ms of its slot's
    # Redis acquisition), and each pass saves a Redis hand-off: more blocks/s, fewer Redis commands
    # (doc/BENCHMARKS.md, "The limiter's cohort").
    LOCAL_PASSES = Cohort::MAX_SLOT_PASSES

    # min_replicas_acked: replicas each slot grant must reach before the block runs (nil: the
    # configured default). local_passes: times in a row a release may pass its slot to a waiting
    # thread of its own process without Redis (within 10 ms of the slot's Redis acquisition, as
    # DistMutex's cohort hand-off; LOCAL_PASSES); 0: every slot goes back through Redis. fair: false: a released
    # slot is kept for this process's next running thread, up to 50 ms in a row (doc/BEHAVIOUR.md).
    def initialize(name, count, wait_timeout: 5, lease: Deprecation::UNSET, client: nil, min_replicas_acked: nil, # rubocop:disable Metrics/ParameterLists -- all keywords with defaults
                   local_passes: LOCAL_PASSES, lock_timeout: Deprecation::UNSET, fair: true)
      given, lease = Deprecation.rename("Ferrolock::ConcurrentLimiter.new", :lock_timeout, :lease,
                                        [lock_timeout, lease], 30)
      @name = Validate.own_name!(:name, name)
      @count = Validate.positive_integer!(:count, count)
      @wait_timeout = Validate.seconds!(:wait_timeout, wait_timeout, allow_zero: true)
      @lease = Validate.seconds!(given, lease)
      @client = Validate.client!(client)
      local_passes = Cohort.local_passes!(local_passes, Cohort::MAX_SLOT_PASSES)
      @native = Backend.build(:ConcurrentLimiter, @client, @name, @count, @lease,
                              Ferrolock.min_replicas_acked!(min_replicas_acked), local_passes,
                              Validate.boolean!(:fair, fair))
      LocalLimits.record(@client.namespace, @name, @count)
      # Made once: every acquisition passes it to Interrupts.acquire. A slot given back was granted
      # (the core counted its :acquired when History alone listens): its release is counted too.
      @give_back = ->(slot) { release_counted(slot) if slot }
      # Made once too: WaitTimeout.acquire calls it with the acquisition's wait_timeout and start.
      @stalled = ->(timeout, started) { over_limit(timeout, started, "Redis did not answer") }
      @history = History::Counter.new(:concurrent_limiter, @name)
    end

    # Runs the block in a slot and returns its value. Waits up to wait_timeout seconds for a slot
    # (0: don't wait), else raises Ferrolock::OverLimit. Raises Ferrolock::LockLost after the
    # block if its slot was lost meanwhile (Redis lost the data): the limit may have been exceeded.
    def within_limit(wait_timeout: @wait_timeout)
      raise ArgumentError, "within_limit needs a block" unless block_given?

      # The default was validated by the constructor.
      unless wait_timeout.equal?(@wait_timeout)
        wait_timeout = Validate.seconds!(:wait_timeout, wait_timeout, allow_zero: true)
      end
      slot = nil
      finished = false
      begin
        since = acquire(wait_timeout, keep: ->(s) { slot = s })
        value = yield
        finished = true
        value
      ensure
        # A block that raised keeps its own exception: a lost slot is then only reported; a failed
        # release is never raised (see ReleaseFailure). Deferring interrupts here means none can
        # skip the release (see Interrupts).
        Interrupts.release { release(slot, since, finished: finished) if slot }
      end
    end

    # { limit:, in_use:, waiting: } read from Redis: every process's slots and waiters in line (one
    # entry per waiting process), plus this process's threads waiting behind its entry. `limit` is
    # this object's; `stored_limit:` is added when the slots set holds another one (written by the
    # latest caller to take a free slot: some process passes a different limit for this name), and
    # `override: { limit:, paused: }` while an operator changed it live (Admin#set_limit, #pause).
    def status
      in_use, waiting = @native.status
      status = { limit: @count, in_use: in_use, waiting: waiting }
      stored = stored_limit
      status = status.merge(stored_limit: stored) unless stored.nil? || stored == @count
      over = override
      over ? status.merge(override: over.to_h) : status
    end

    def inspect
      "#<#{self.class.name} #{@name.inspect} count=#{@count} wait_timeout=#{@wait_timeout} " \
        "lease=#{@lease}>"
    end

    private

    # `keep` records the slot the moment it is granted (see Interrupts). Returns when (Ferrolock.monotonic).
    def acquire(wait_timeout, keep:)
      LockLostWatcher.ensure_started
      started = Ferrolock.monotonic
      # History alone listens: the core times the wait and counts the grant in the tally.
      audience = Ferrolock.audience(:acquired)
      tally = @history.tally_when(audience)
      slot = WaitTimeout.acquire(@stalled, wait_timeout, started, keep: keep, give_back: @give_back) do
        @native.acquire(wait_timeout, tally)
      end
      raise over_limit(wait_timeout, started, "all #{@count} slots stayed busy") unless slot

      since = Ferrolock.monotonic
      instrument(:acquired, **waited_payload(since - started)) if audience == :all
      since
    end

    def over_limit(wait_timeout, started, what)
      instrument(:over_limit, **waited_payload(Ferrolock.monotonic - started))
      OverLimit.new("ConcurrentLimiter #{@name.inspect}: #{what} for #{wait_timeout} s (wait_timeout)",
                    limiter: self)
    end

    # since: when the slot was granted (Ferrolock.monotonic; nil when an exception landed first),
    # for :released's :held.
    def release(slot, since, finished:)
      audience = release_counted(slot)
      instrument(:released, held: Ferrolock.monotonic - since) if since && audience == :all
    rescue LockLost
      instrument(:lock_lost, detected: :release)
      raise if finished
    rescue Error => e
      ReleaseFailure.report(e, what: "ConcurrentLimiter #{@name.inspect}", finished: finished,
                               primitive: :concurrent_limiter, name: @name, limit: @count)
    end

    # The native release of slot; returns the audience of :released. History alone listens: the core
    # counts the release and its hold in the tally.
    def release_counted(slot)
      audience = Ferrolock.audience(:released)
      @native.release(slot, @history.tally_when(audience))
      audience
    end

    # The limit stored by the latest caller to take a free slot, or nil (read by the core:
    # concurrent_limiter/inspect.rs). A separate read: status is an operator's read, not the hot path.
    def stored_limit
      @native.stored_limit
    end

    # The operators' Admin::LimitOverride::Override in force, or nil (none under Testing.disable!).
    # A separate read, as stored_limit's.
    def override
      return nil if Backend.factory&.disabled?

      Admin::LimitOverride.read(@client, @name)
    end

    # :waited, as DistMutex and DualLock send it; :duration is its deprecated old name.
    def waited_payload(waited)
      { waited: waited, duration: waited }
    end

    def instrument(event, **extra)
      Ferrolock.instrument(event, payload(**extra))
    end

    def payload(**extra)
      { primitive: :concurrent_limiter, name: @name, limit: @count, **extra }
    end
  end
end
