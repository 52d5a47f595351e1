# frozen_string_literal: true

module Ferrolock
  # Reports a lease the watchdog found lost as a :lock_lost event at once (payload
  # `detected: :renewal`), instead of only when its holder releases it, and a loss of Redis'
  # data its probes found (DataLoss). The watchdog is a native
  # thread that cannot call Ruby, so it queues the loss and one Ruby thread per process waits
  # for it without the GVL. Started by the first acquisition or :lock_lost subscription of the
  # process (so a forked child starts its own); only losses from then on are reported.
  module LockLostWatcher
    # Seconds one native wait lasts before the thread looks again (it is woken at once by a loss).
    WAIT = 5.0
    LOCK = Mutex.new
    private_constant :LOCK

    class << self
      # Cheap when already running: one fork-generation comparison and one alive? check.
      def ensure_started
        return if running?

        LOCK.synchronize do
          next if running?

          Native.listen_lost_leases
          @generation = Native.fork_generation
          # A new thread inherits its creator's handle_interrupt masks (an acquisition may run under
          # one): start from a clean slate, so Thread#kill and exit end this one at once.
          @thread = Thread.new { Thread.handle_interrupt(Object => :immediate) { watch } }
          @thread.name = "ferrolock-lock-lost"
          @thread.report_on_exception = false
        end
        nil
      end

      # The :lock_lost payload of one native notice (same keys as the release-time event).
      def payload(primitive, name, fencing_token, queue)
        primitive = primitive.to_sym
        payload = { primitive: primitive }
        case primitive
        when :dual_lock then payload[:key] = name
        when :shoryuken_lock then payload.merge!(queue: queue, message_id: name)
        else payload[:name] = name
        end
        payload[:fencing_token] = fencing_token if fencing_token
        payload.merge(detected: :renewal)
      end

      private

      def running?
        @generation == Native.fork_generation && @thread&.alive?
      end

      def watch
        loop do
          notice = Native.next_lost_lease(WAIT)
          next unless notice
          next DataLoss.report(*notice.drop(1)) if notice.first == "data_lost"

          Ferrolock.instrument(:lock_lost, payload(*notice))
        end
      rescue StandardError => e
        # The watcher's own thread (nothing foreign is raised into it). The next ensure_started
        # starts a fresh thread.
        Ferrolock.log(:warn, "ferrolock: lock_lost watcher stopped: #{e.class}: #{e.message}")
      end
    end
  end
end
