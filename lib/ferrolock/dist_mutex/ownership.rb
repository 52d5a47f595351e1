# frozen_string_literal: true

module Ferrolock
  class DistMutex
    # One DistMutex held by this process: the native hold, the lock's key in Owners, who owns it
    # and how often the reaper looks (tick, seconds). The owner is a fiber (as with Ruby 3's
    # Mutex); its thread is kept too because a dead thread's suspended fibers still report alive.
    Ownership = Struct.new(:native_mutex, :hold, :key, :thread, :fiber, :tick, keyword_init: true) do
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
