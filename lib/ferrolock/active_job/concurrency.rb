# frozen_string_literal: true

require_relative "concurrency_policy"
require_relative "slots"
require_relative "promotion"
require_relative "expiry_timer"
require_relative "parked_adapter"
require_relative "job_hooks"
require_relative "admission"
require_relative "concurrency_rule"
require_relative "concurrency_rules"
require_relative "solid_queue_macro"
require_relative "before_perform"
require_relative "aborted_enqueue"
require_relative "enqueue_all"

module Ferrolock
  module ActiveJob
    # Solid Queue's `limits_concurrency` for any ActiveJob adapter, on Redis:
    #
    #   class DeliverJob < ApplicationJob
    #     limits_concurrency to: 2, key: ->(account) { account }, duration: 5.minutes
    #   end
    #
    # At most `to:` jobs of one key hold a slot at once, from enqueue until their perform ends. A
    # job over the limit is blocked (on_conflict: :block, the default): its payload is parked in
    # Redis, and when a slot frees the oldest blocked job of the key is enqueued at once (FIFO),
    # by the release that freed it. A slot is a lease of `duration`, renewed while the job
    # performs, so a job outliving `duration` keeps its slot and a dead holder's slot frees when
    # the lease runs out (each process's ExpiryTimer promotes the next job then).
    #
    # A job checks its slot again when it performs (the slot token is its job_id): a job that got
    # there without one (an adapter's own retry, perform_all_later, a scheduled job now due, a
    # lease that ran out while it queued) takes a free slot or is blocked then. perform_now is not
    # limited (as in Solid Queue). A job that enqueues itself again while it holds its slot (a
    # continuation's resumption) keeps it: it never waits behind itself.
    #
    # The Railtie includes this into ActiveJob::Base; without Rails, `include` it into a job class
    # (or ActiveJob::Base) yourself.
    module Concurrency
      # max_blocked reached, with on_max_blocked: :raise (the default).
      class TooManyBlocked < Ferrolock::Error; end

      def self.included(base)
        # Included already higher up (the Railtie's ActiveJob::Base): its callbacks serve.
        return if base.respond_to?(:ferrolock_concurrency)

        base.extend(ClassMethods, ConcurrencyRules::ClassMethods, SolidQueueMacro::ClassMethods)
        base.prepend(JobHooks)
        BeforePerform.install
        EnqueueAll.install
        # The rules' enqueue check goes first (outermost): an enqueue they refuse is never parked by
        # limits_concurrency (a parked job runs later, so perform_later must not say false for it).
        base.around_enqueue { |job, block| ConcurrencyRules.around_enqueue(job, block) }
        base.around_enqueue { |job, block| Concurrency.around_enqueue(job, block) }
        base.around_perform { |job, block| Concurrency.around_perform(job, block) }
        base.around_perform { |job, block| ConcurrencyRules.around_perform(job, block) }
      end

      # Class-level API.
      module ClassMethods
        # Solid Queue's options (key:, to:, group:, duration:, on_conflict:) and max_blocked: /
        # on_max_blocked: (:raise or :discard). Bad options raise ArgumentError naming the option.
        # Also `limits_concurrency`, unless Solid Queue's macro of that name is there (SolidQueueMacro).
        def ferrolock_limits_concurrency(**options)
          @ferrolock_concurrency = ConcurrencyPolicy.new(**options)
        end

        # The policy in force (a subclass inherits its parent's).
        def ferrolock_concurrency
          return @ferrolock_concurrency if instance_variable_defined?(:@ferrolock_concurrency)

          superclass.respond_to?(:ferrolock_concurrency) ? superclass.ferrolock_concurrency : nil
        end
      end

      # The slot's fencing token while this job performs (nil outside, or when not limited). It
      # grows with every admission of the key: a store that remembers the highest token it saw can
      # refuse the writes of a job that outlived its lease (a paused process).
      def ferrolock_fence
        @ferrolock_slot&.slot&.fence
      end

      # True once the slot's renewal found it gone: its lease ran out (the process was paused or
      # cut off from Redis longer than `duration`) and another job may hold it now.
      def ferrolock_slot_lost?
        holding = @ferrolock_slot
        holding ? holding.slot.lost? : false
      end

      # A performing job's slot, whether it enqueued itself again, since when (:held); shared by its copies (a dup).
      Holding = Struct.new(:slot, :resumed, :since)
      private_constant :Holding

      class << self
        def around_enqueue(job, block)
          policy = job.class.ferrolock_concurrency
          SolidQueueMacro.check_enqueue(job, policy)
          return block.call if skip?(policy) || job.instance_variable_get(:@ferrolock_promoted)

          holding = held_slot(job)
          # Checked when it runs (Solid Queue checks when it is due), unless it is this very job
          # going on (resumption): that keeps its slot.
          return block.call if job.scheduled_at && !holding

          admission = admission(job, policy)
          outcome, _fence, blocked = admission.admit(at_perform: false)
          return resume(admission, holding, block) if holding && outcome == :held

          enqueue_outcome(admission, outcome, blocked, block)
        end

        def around_perform(job, block)
          BeforePerform.started(job)
          policy = job.class.ferrolock_concurrency
          return block.call if skip?(policy) || !job.instance_variable_get(:@ferrolock_from_queue)

          admission = admission(job, policy)
          outcome, fence, blocked = admission.admit(at_perform: true)
          return admission.not_performed(outcome, blocked) unless outcome == :held

          perform_holding(admission, admission.slots.running(admission.key, job, policy, fence), block)
        end

        private

        def admission(job, policy)
          Admission.new(job, policy, policy.key_for(job), Slots.for(Ferrolock.client))
        end

        def skip?(policy)
          policy.nil? || Backend.pass_through?
        end

        # The job enqueues itself while it holds its slot: the slot stays its own, unless that
        # enqueue fails.
        def resume(admission, holding, block)
          job = admission.job
          BeforePerform.hold(job, admission.key)
          holding.resumed = true
          enqueued = false
          result = block.call
          enqueued = AbortedEnqueue.enqueued?(job)
          result
        ensure
          holding.resumed = enqueued
        end

        def enqueue_outcome(admission, outcome, blocked, block)
          case outcome
          when :held then enqueue_held(admission, block)
          when :blocked, :waiting then park(admission, blocked, block)
          when :full
            message = "#{blocked} jobs blocked already on limits_concurrency key #{admission.key} (max_blocked)"
            if admission.policy.on_max_blocked == :raise
              raise TooManyBlocked, "#{admission.job.class.name} #{admission.job.job_id}: #{message}"
            end

            admission.refuse(:max_blocked, message)
          else
            admission.refuse(:on_conflict, "limits_concurrency key #{admission.key} is at its limit " \
                                           "(on_conflict: :discard)")
          end
        end

        # The slot of this job, if it performs now and enqueues itself to go on. A job a
        # concurrency_rule refused at perform is put off instead: its slot is given back when its
        # perform ends, and the retry is admitted like any other job.
        def held_slot(job)
          job.instance_variable_get(:@ferrolock_slot) unless job.instance_variable_get(:@ferrolock_rule_refused)
        end

        # A slot taken for a job its adapter then did not enqueue (it raised, or ActiveJob 7.1+
        # recorded an EnqueueError) is given back at once, not held until its lease runs out.
        def enqueue_held(admission, block)
          BeforePerform.hold(admission.job, admission.key)
          enqueued = false
          result = block.call
          enqueued = AbortedEnqueue.enqueued?(admission.job)
          result
        ensure
          give_back(admission) unless enqueued
        end

        def give_back(admission)
          admission.slots.give_back(admission.key, admission.job.job_id, admission.policy.limit_for(admission.job))
        rescue Ferrolock::Error => e
          Ferrolock.log(:warn, "ferrolock: limits_concurrency #{admission.key}: could not give back the slot of " \
                               "#{admission.job.job_id}, whose enqueue failed (#{e.class}: #{e.message}); it " \
                               "frees when its lease runs out")
        end

        # Stored in Redis already: ActiveJob's enqueue goes on, to ParkedAdapter.
        def park(admission, blocked, block)
          admission.log("blocked by limits_concurrency key #{admission.key} (#{blocked} waiting)")
          admission.instrument(:blocked, :enqueue, waiting: blocked)
          admission.job.instance_variable_set(:@ferrolock_parked, true)
          block.call
        ensure
          admission.job.instance_variable_set(:@ferrolock_parked, false)
        end

        def perform_holding(admission, slot, block)
          holding = Holding.new(slot, false, Ferrolock.monotonic)
          admission.job.instance_variable_set(:@ferrolock_slot, holding)
          block.call
        ensure
          admission.job.instance_variable_set(:@ferrolock_slot, nil)
          finish(admission, holding) if holding
        end

        def finish(admission, holding)
          job = admission.job
          slot = holding.slot
          return admission.slots.keep(slot) if holding.resumed

          held = admission.slots.release(admission.key, slot, admission.policy.limit_for(job))
          return lost(admission, slot) if held == false

          Ferrolock.instrument(:released, primitive: :limits_concurrency, name: admission.key,
                                          job_class: job.class.name, job_id: job.job_id, forced: false,
                                          held: Ferrolock.monotonic - holding.since)
        rescue Ferrolock::Error => e
          ReleaseFailure.report(e, what: "limits_concurrency #{admission.key}", finished: true,
                                   primitive: :limits_concurrency, name: admission.key)
        end

        def lost(admission, slot)
          job = admission.job
          Ferrolock.log(:warn, "ferrolock: #{job.class.name} #{job.job_id}: its limits_concurrency slot on " \
                               "#{admission.key} was lost before the job ended (its lease of " \
                               "#{admission.policy.duration} s ran out); the late release freed nothing")
          Ferrolock.instrument(:lock_lost, primitive: :limits_concurrency, name: admission.key, job_id: job.job_id,
                                           fencing_token: slot.fence, detected: :release)
        end
      end
    end
  end
end
