# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    module Unique
      # The uniqueness locks of the jobs running in this process, renewed by one background thread
      # about every lease/3 (token-checked: only while the key still holds the job's jid). A process
      # that dies (kill -9, OOM) stops renewing, so its locks expire after one lease, not after ttl.
      module Leases
        Held = Struct.new(:lock, :jid, :lease, :renew_at)

        @mutex = Mutex.new
        @changed = ConditionVariable.new
        @held = {}
        @thread = nil
        @pid = nil

        class << self
          # Starts renewing lock (a Unique::Lock held by jid) every lease/3 seconds until #drop.
          def hold(lock, jid, lease)
            @mutex.synchronize do
              reset_after_fork
              @held[lock.key] = Held.new(lock, jid, lease, Ferrolock.monotonic + (lease / 3.0))
              @thread = Thread.new { renew_forever } unless @thread&.alive?
              @changed.signal
            end
          end

          # Stops renewing lock; with jid, only while jid is the one renewed (a resumption of the job may
          # hold it by now). Returns what was renewed, or nil.
          def drop(lock, jid = nil)
            @mutex.synchronize do
              held = @held[lock.key]
              @held.delete(lock.key) if held && (jid.nil? || held.jid == jid)
            end
          end

          private

          # A forked child inherits the hash but not the thread, nor the parent's running jobs.
          def reset_after_fork
            return if @pid == Process.pid

            @pid = Process.pid
            @held = {}
            @thread = nil
          end

          # Unmasked: a thread inherits its creator's handle_interrupt masks, and this one must stay
          # killable (at exit).
          def renew_forever
            Thread.current.name = "ferrolock-unique-leases"
            Thread.handle_interrupt(Object => :immediate) { renew_loop }
          end

          def renew_loop
            loop do
              # Renewed under the mutex: a job that finished meanwhile was dropped first, so a renewal
              # never extends a lock its job has just released or re-timed (after a failure).
              @mutex.synchronize do
                @changed.wait(@mutex, wait_time) # a lock added meanwhile wakes it to re-plan
                now = Ferrolock.monotonic
                @held.values.select { |held| held.renew_at <= now }.each do |held|
                  held.renew_at = now + (held.lease / 3.0)
                  renew(held)
                end
              end
            end
          end

          def wait_time
            next_at = @held.each_value.map(&:renew_at).min
            next_at ? [next_at - Ferrolock.monotonic, 0].max : 60
          end

          def renew(held)
            return if held.lock.expire(held.jid, held.lease)

            @held.delete(held.lock.key)
            Ferrolock.log(:warn, "ferrolock: unique lock #{held.lock.digest.inspect} of job #{held.jid} was lost " \
                                 "while it ran (expired or taken by a duplicate)")
          rescue StandardError => e
            # Redis unreachable for a moment: the next tick tries again (the lease has 2/3 left).
            # (The renewal thread's own: nothing foreign is raised into it.)
            Ferrolock.log(:warn, "ferrolock: renewing unique lock #{held.lock.digest.inspect} failed: #{e.message}")
          end
        end
      end
    end
  end
end
