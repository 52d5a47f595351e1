# frozen_string_literal: true

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
    attr_reader :name, :client

    def initialize(name, expire: nil, auto_release: true, lease: 30, client: nil)
      @name = Validate.name!(:name, name)
      expire = Validate.seconds!(:expire, expire) unless expire.nil?
      lease = Validate.seconds!(:lease, lease)
      @auto_release = Validate.boolean!(:auto_release, auto_release)
      if !auto_release && expire.nil?
        raise ArgumentError,
              "auto_release: false needs expire: (the lock would never be released)"
      end

      @client = Validate.client!(client)
      @native = Native::DistMutex.new(@client.native, @name, expire, auto_release, lease)
      @holds = {}
      @holds_lock = ::Mutex.new
    end

    # Waits for the lock (at most timeout seconds: Ferrolock::TimeoutError after that).
    def lock(timeout: nil)
      raise ThreadError, "deadlock; recursive locking" if owned?

      timeout = Validate.seconds!(:timeout, timeout, allow_zero: true) unless timeout.nil?
      started = Ferrolock.monotonic
      hold = @native.lock(timeout)
      remember(hold)
      Ferrolock.instrument(:acquired, primitive: :dist_mutex, name: @name, waited: Ferrolock.monotonic - started)
      self
    end

    # Takes the lock if free; never waits.
    def try_lock
      return false if owned?

      hold = @native.try_lock
      return false unless hold

      remember(hold)
      true
    end

    # Releases the lock. Raises ThreadError unless the current fiber holds it, and
    # Ferrolock::LockLost when the lease was lost meanwhile (the section was not exclusive).
    def unlock
      hold = @holds_lock.synchronize { @holds.delete(Fiber.current) }
      raise ThreadError, "Attempt to unlock a mutex which is not locked by this thread" unless hold

      @native.unlock(hold)
      self
    rescue LockLost
      Ferrolock.instrument(:lock_lost, primitive: :dist_mutex, name: @name)
      raise
    end

    # Runs the block holding the lock and returns its value.
    def synchronize(timeout: nil)
      raise ThreadError, "must be called with a block" unless block_given?

      lock(timeout: timeout)
      begin
        yield
      ensure
        unlock if owned?
      end
    end

    # True when anyone (any thread, process or host) holds the lock.
    def locked?
      @native.locked?
    end

    # True when the current fiber holds the lock.
    def owned?
      @holds_lock.synchronize { @holds.key?(Fiber.current) }
    end

    # A number that grows with every acquisition of this name, while owned; else nil.
    # Pass it to storage that must reject writes from a holder that lost the lock.
    def fencing_token
      @holds_lock.synchronize { @holds[Fiber.current] }&.fencing_token
    end

    def inspect
      "#<#{self.class.name} #{@name.inspect} auto_release=#{@auto_release}>"
    end

    private

    def remember(hold)
      @holds_lock.synchronize { @holds[Fiber.current] = hold }
    end
  end
end
