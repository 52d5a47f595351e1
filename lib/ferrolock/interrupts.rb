# frozen_string_literal: true

module Ferrolock
  # Makes acquisitions and releases atomic with respect to asynchronous interrupts
  # (Thread#raise, Thread#kill, Timeout.timeout), as Ruby's Mutex is: an interrupted acquisition
  # holds nothing, a granted one is recorded before any exception can land, and a release, once
  # begun, completes.
  #
  # Asynchronous exceptions are deferred (Thread.handle_interrupt(Object => :never)) around
  # "native call + record what it returned". A wait still ends promptly: when Ruby queues an
  # exception it cuts the native wait short, and the native acquisition then gives up with
  # Native::Interrupted (nothing acquired); the exception is raised as the mask is left.
  # Signals and Thread#wakeup carry no exception: they neither end a wait nor fail a release.
  module Interrupts
    DEFER = { Object => :never }.freeze
    # What an attempt returns when an exception cut it short (no array per call: this is every
    # lock's path).
    INTERRUPTED = Object.new.freeze
    private_constant :INTERRUPTED

    module_function

    # Yields to make the native acquisition and passes what it returned to `keep` (record it),
    # unless an exception was queued meanwhile: then it goes to `give_back` (which ignores
    # "not acquired" values) and the exception is raised. Returns what the block returned.
    def acquire(keep:, give_back:, &native)
      # The first attempt outside the loop (every lock's path: no loop block entered).
      value = Thread.handle_interrupt(DEFER) { attempt(false, keep, give_back, &native) }
      return value unless INTERRUPTED.equal?(value)

      loop do
        # Leaving the mask raised nothing: the caller's own Thread.handle_interrupt defers the
        # queued exception. Raise it now if that mask lets it through at a blocking point (as
        # Mutex#lock would); otherwise wait on, as Mutex#lock does under such a mask.
        Native.check_interrupts
        value = Thread.handle_interrupt(DEFER) { attempt(true, keep, give_back, &native) }
        return value unless INTERRUPTED.equal?(value)
      end
    end

    # Runs the release (take the hold out of the registry, then the native release) with
    # asynchronous exceptions deferred until it is done.
    def release(&block)
      Thread.handle_interrupt(DEFER, &block)
    end

    # One masked attempt: the value when kept, INTERRUPTED when cut short.
    def attempt(deferred, keep, give_back)
      # An exception queued before the native call: don't start it (unless it is the caller's
      # own deferred one, see acquire).
      return INTERRUPTED if !deferred && Thread.pending_interrupt?

      begin
        value = yield
      rescue Native::Interrupted
        return INTERRUPTED
      end
      # Granted just as an exception was queued: give it back, so that an interrupted
      # acquisition never holds anything.
      if !deferred && Thread.pending_interrupt?
        give_back_quietly(give_back, value)
        return INTERRUPTED
      end
      keep.call(value)
      value
    end
    private_class_method :attempt

    def give_back_quietly(give_back, value)
      give_back.call(value)
    rescue Ferrolock::Error => e
      Ferrolock.log(:warn, "ferrolock: giving back an interrupted acquisition failed: #{e.class}: #{e.message}")
    end
    private_class_method :give_back_quietly
  end
end
