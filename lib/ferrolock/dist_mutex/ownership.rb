# frozen_string_literal: true

module Ferrolock
  class DistMutex
    # One DistMutex held by this process: the native hold, the lock's key in Owners and its name,
    # who owns it, how often the reaper looks (tick, seconds) and since when (Ferrolock.monotonic: a
    # :released event's :held). The owner is a fiber (as with Ruby 3's
    # Mutex); its thread is kept too because a dead thread's suspended fibers still report alive.
    # Positional (made on every lock: keyword_init's hash costs more than the rest of the struct).
    Ownership = Struct.new(:native_mutex, :hold, :key, :name, :thread, :fiber, :tick, :since) do
      # True when the owner can never unlock it: its thread or fiber has ended.
      def owner_gone?
        !thread.alive? || !fiber.alive?
      end

      # True for another live fiber of the calling thread (which cannot run while this one waits).
      def sibling_fiber?
        !fiber.equal?(Fiber.current) && thread.equal?(Thread.current) && fiber.alive?
      end

      def owned_by_current?(native)
        native_mutex.equal?(native) && fiber.equal?(Fiber.current)
      end
    end
  end
end
