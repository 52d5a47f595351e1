# frozen_string_literal: true

require "json"

module Ferrolock
  module ActiveJob
    # The Redis side of limits_concurrency for one client (Ferrolock::Native::JobConcurrency): a
    # job's admission at enqueue and at perform, its slot's release, and the promotion of blocked
    # jobs (enqueued here through their own adapter as their slot is granted).
    class Slots
      LOCK = Mutex.new
      private_constant :LOCK

      # The one for this client (Ferrolock.client), made on first use; a reconfigured client gets
      # a new one and the old one's timer ends.
      def self.for(client)
        current = @current
        return current if current&.client.equal?(client)

        LOCK.synchronize do
          @current = new(client) unless @current&.client.equal?(client)
          @current
        end
      end

      # False once another client's Slots replaced this one.
      def self.current?(slots)
        @current.equal?(slots)
      end

      # Stops the timer and forgets the Slots in use (a test suite's teardown, before its Redis
      # goes); the next job makes a new one.
      def self.reset!
        current = LOCK.synchronize { @current.tap { @current = nil } }
        current&.timer&.stop
        nil
      end

      attr_reader :client, :native, :timer

      # native: Native::JobConcurrency's interface (Backend's: in memory under Testing.fake!).
      def initialize(client, native = Backend.build(:JobConcurrency, client))
        @client = client
        @native = native
        @timer = ExpiryTimer.new(self)
      end

      # [outcome, fencing token, blocked count]; promoted jobs are enqueued before it returns.
      # promotion: the one this copy of the job carries (limits_concurrency's: Promotion; a
      # concurrency_rule's places tell no copies apart).
      def admit(job, policy, key, at_perform:, promotion: 0)
        limit = policy.limit_for(job)
        outcome, fence, blocked, promoted = @native.admit(
          key, job.job_id, JSON.generate(job.serialize), at_perform,
          # A job already running is parked whatever max_blocked says: it is never dropped.
          [limit, policy.duration, policy.on_conflict.to_s, at_perform ? 0 : policy.max_blocked.to_i],
          promotion
        )
        # Once Redis answered: a process that cannot reach it has no timer polling in vain.
        @timer.ensure_started
        # A parked job or a running slot lost with Redis' data is reported (DataLoss).
        LockLostWatcher.ensure_started
        Promotion.enqueue(promoted, self, key)
        [outcome, fence, blocked]
      end

      # The slot of a job admitted at perform, renewed until released.
      def running(key, job, policy, fence)
        @native.running(key, job.job_id, policy.duration, fence)
      end

      # Gives the slot back: true when it was still held (false: its lease had run out, so it was
      # counted free already and nothing was freed now). nil when released already.
      def release(key, slot, limit)
        held, promoted = @native.release(slot, limit)
        Promotion.enqueue(promoted, self, key) if promoted
        held
      end

      # The slot of a job that will not perform (its enqueue failed after it was admitted; a
      # promoted job that cannot be built any more; it failed before it performed), and its
      # payload, given back. promotion: the copy's (0: none); a copy of another promotion than the
      # one that started gives back nothing (the slot is the running copy's): false.
      def give_back(key, job_id, limit = nil, promotion: 0)
        held, promoted = @native.give_back(key, job_id, limit, promotion)
        Promotion.enqueue(promoted, self, key)
        held
      end

      # The job enqueued itself again while holding its slot (a continuation's resumption).
      def keep(slot)
        @native.keep(slot)
      end

      # The timer's visit of a key it claimed: frees the key's expired slots and enqueues the jobs
      # promoted into them.
      def reap(key, claim)
        Promotion.enqueue(@native.reap(key, claim), self, key)
      end

      # [keys due, their claim (for #reap), seconds until the next is due or nil]
      def due(recheck)
        @native.due(recheck)
      end

      # "<namespace>:{concurrency:<key>}:<part>" (slots, blocked, jobs, fence)
      def key_part(key, part)
        @native.key_part(key, part)
      end
    end
  end
end
