# frozen_string_literal: true

module Ferrolock
  module Shoryuken
    # Whether an operator paused a queue's LockMiddleware (Admin#pause(queue, kind: :shoryuken_lock),
    # `ferrolock pause --queue`, the Web tab's Shoryuken page). Message markers are hash-tagged per
    # message, so the queue's pause cannot be read in the same script as a message's lease: each
    # process keeps what it last read per (client, queue) and reads it again once it is REFRESH old,
    # on the thread of the message that finds it so (one HMGET a second per queue and process). A
    # reading older than REFRESH is never used: threads that find it so meanwhile wait for the read (a
    # stale "not paused" would let their messages run after the pause). A message costs a Hash lookup
    # and a clock read; a message that starts REFRESH after a pause or resume in any process obeys it.
    module QueuePause
      # Seconds a read is used before the next message reads it again.
      REFRESH = 1.0
      # What one process last read of one queue: paused or not, and when (Ferrolock.monotonic).
      Reading = Struct.new(:paused, :read_at)
      @readings = {}.compare_by_identity # client => { queue => Reading }
      @lock = Mutex.new

      class << self
        # True while queue's lock is paused, as this process last read it (at most REFRESH ago).
        def paused?(client, queue)
          return read(client, queue) if Admin::LimitOverride.fake? # Testing.fake!: in memory, read each time

          reading = @readings[client]&.[](queue)
          return reading.paused if reading && Ferrolock.monotonic - reading.read_at < REFRESH

          @lock.synchronize { refresh_locked(client, queue) }
        end

        # True when payload[:queue]'s lock is paused and sqs_msg was so held: neither run nor deleted, SQS
        # delivers it again after `delay` seconds (each delivery counts towards a redrive policy's
        # maxReceiveCount). A failed visibility change is raised, as a failed delete is: the message then
        # comes back after the queue's own visibility timeout.
        def held?(client, sqs_msg, payload, delay)
          return false unless paused?(client, payload[:queue])

          sqs_msg.change_visibility(visibility_timeout: delay) if sqs_msg.respond_to?(:change_visibility)
          Ferrolock.instrument(:rescheduled, payload.merge(reason: :paused, delay: delay))
          true
        end

        # Forgets every reading (tests).
        def reset!
          @lock.synchronize { @readings = {}.compare_by_identity }
        end

        private

        # One thread reads Redis; the others waiting here then find its fresh reading.
        def refresh_locked(client, queue)
          queues = (@readings[client] ||= {})
          current = queues[queue]
          return current.paused if current && Ferrolock.monotonic - current.read_at < REFRESH

          # Dated before the read: Redis answers for a moment after it, so REFRESH after a change no
          # reading from before it is used.
          asked = Ferrolock.monotonic
          paused = read_or_keep(client, queue, current)
          queues.clear if queues.size >= MAX_QUEUES && !current
          queues[queue] = Reading.new(paused, asked)
          paused
        end

        # Redis down: the last reading stands (the message's own lease then meets the error and its
        # on_redis_error policy), and the next read waits REFRESH.
        def read_or_keep(client, queue, current)
          read(client, queue)
        rescue Ferrolock::Error
          current&.paused || false
        end

        def read(client, queue)
          name = Admin::LimitOverride.stored_name(queue, :shoryuken_lock)
          override = Admin::LimitOverride.read(client, name, keep: true)
          override&.paused || false
        end
      end

      # Queues remembered per client; queue names come from the app's configuration, so it is a bound
      # that is never met in practice.
      MAX_QUEUES = 1000
    end
  end
end
