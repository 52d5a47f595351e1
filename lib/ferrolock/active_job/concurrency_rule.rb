# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    # One GoodJob-style rule (`concurrency_rule`), built on ferrolock's limiter and rate limiter; a job
    # class may have several, checked in the order they were declared:
    #
    #   concurrency_rule key: ->(account) { account }, perform_limit: 2
    #   concurrency_rule key: "partner-api", perform_throttle: [10, :minute], enqueue_throttle: [1000, :hour]
    #   concurrency_rule key: ->(report) { report }, enqueue_limit: 1, total_limit: 2
    #
    # - perform_limit: at most n of the key perform at once (a ConcurrentLimiter slot held while it performs);
    # - perform_throttle: [count, period]: at most count performs start in any period (a sliding-window RateLimiter);
    # - enqueue_throttle: [count, period]: at most count enqueues per period; past it perform_later returns false;
    # - enqueue_limit: at most n of the key enqueued and not started; past it perform_later returns false;
    # - total_limit: at most n of the key enqueued or performing; past it perform_later returns false, and at
    #   perform (as GoodJob's, when there is no perform_limit) a job without its place waits for one.
    # enqueue_limit and total_limit are places in limits_concurrency's slots (job_concurrency's scripts, with
    # on_conflict: :discard): taken at enqueue, each a lease of `duration` (a job lost from its queue stops
    # counting then; a scheduled job's lease starts when it is due), the total one renewed while the job
    # performs and given back when it ends.
    # A job over a perform rule is not run now: ActiveJob's retry_job enqueues it again after a delay (the
    # throttle's retry_after, or 1, 2, 4 ... s up to 5 min for a limit), which ActiveJob's own "Retrying"
    # log line shows; meanwhile it keeps its total_limit place (it is still in flight) until its lease runs out.
    class ConcurrencyRule
      # A perform a rule refused: run again after `delay` seconds; `error` is the limiter's OverLimit.
      Over = Struct.new(:delay, :error)

      # How long a crashed process's perform_limit slot stays taken (renewed while the job performs).
      LEASE = 30

      # A place of enqueue_limit / total_limit, as the policy limits_concurrency's Slots admit with.
      Place = Struct.new(:limit, :duration) do
        def limit_for(_job) = limit
        def on_conflict = :discard
        def max_blocked = nil
      end
      private_constant :Place

      attr_reader :perform_limit, :perform_throttle, :enqueue_throttle, :enqueue_limit, :total_limit, :duration

      def initialize(key:, label: nil, perform_limit: nil, perform_throttle: nil, enqueue_throttle: nil, # rubocop:disable Metrics/ParameterLists -- GoodJob's options, by name
                     enqueue_limit: nil, total_limit: nil, duration: ConcurrencyPolicy::DEFAULT_DURATION)
        # The key, as limits_concurrency's: "<label (default: the class name)>/<key>".
        @keying = ConcurrencyPolicy.new(key: key, group: label)
        @perform_limit = limit!(:perform_limit, perform_limit)
        @enqueue_limit = limit!(:enqueue_limit, enqueue_limit)
        @total_limit = limit!(:total_limit, total_limit)
        @duration = option(:duration) { Validate.seconds!(:duration, duration) }
        @perform_throttle = throttle!(:perform_throttle, perform_throttle)
        @enqueue_throttle = throttle!(:enqueue_throttle, enqueue_throttle)
        return if @perform_limit || @perform_throttle || @enqueue_throttle || @enqueue_limit || @total_limit

        raise ArgumentError, "concurrency_rule: give perform_limit:, perform_throttle:, enqueue_throttle:, " \
                             "enqueue_limit: or total_limit:"
      end

      # nil when the job may be enqueued (its enqueue_limit and total_limit places taken), else the
      # option that refuses it and why.
      def enqueue(job)
        taken = []
        places(job).each do |option, place_key, limit|
          next taken << place_key if take(job, place_key, limit)

          give_back(job, taken)
          return [option, "concurrency_rule key #{@keying.key_for(job)} is at its #{option} of #{limit}"]
        end
        return nil if enqueue_throttle?(job)

        give_back(job, taken)
        [:enqueue_throttle, "concurrency_rule key #{@keying.key_for(job)} is over its enqueue_throttle"]
      end

      # The job was not enqueued after all (a later rule refused it, its adapter failed): its places go.
      def not_enqueued(job)
        give_back(job, places(job).map { |_, place_key, _| place_key })
      end

      # The job starts its perform (every rule let it): it is no longer one of the enqueued.
      def started(job)
        give_back(job, [name(job, "queued")]) if @enqueue_limit
      end

      # Runs the block within this rule; an OverLimit of the rule's own (never one of the block's) comes
      # back as an Over.
      def perform(job, &block)
        if @perform_throttle
          limiter = throttle(@perform_throttle, "perform", job)
          over = own_over_limit(limiter) { limiter.within_limit { nil } }
          return over if over
        end
        return with_place(job) { perform_limited(job, &block) } if @total_limit

        perform_limited(job, &block)
      end

      private

      def perform_limited(job, &block)
        return yield unless @perform_limit

        slots = ConcurrentLimiter.new(name(job, "running"), @perform_limit, wait_timeout: 0, lease: LEASE)
        within(slots, job, &block)
      end

      # [[option, place key, limit]] of this rule's enqueue places.
      def places(job)
        out = []
        out << [:enqueue_limit, name(job, "queued"), @enqueue_limit] if @enqueue_limit
        out << [:total_limit, name(job, "total"), @total_limit] if @total_limit
        out
      end

      # Takes (or keeps: the same job_id again) a place at enqueue; false when the key is at its limit.
      def take(job, place_key, limit)
        held = Slots.for(Ferrolock.client).admit(job, Place.new(limit, @duration + delay(job)), place_key,
                                                 at_perform: false).first == :held
        BeforePerform.hold(job, place_key) if held
        held
      end

      def give_back(job, place_keys)
        slots = Slots.for(Ferrolock.client)
        place_keys.each { |place_key| slots.give_back(place_key, job.job_id) }
      end

      # A scheduled job's place lasts until it is due, then `duration`.
      def delay(job)
        at = job.scheduled_at
        at ? [at.to_f - Time.now.to_f, 0.0].max : 0.0
      end

      # The total_limit place while the job performs (the one it took at enqueue, or a free one),
      # renewed until the block ends. An Over when none is free now; the job keeps it when an inner
      # rule reschedules it.
      def with_place(job)
        slots = Slots.for(Ferrolock.client)
        place_key = name(job, "total")
        place = Place.new(@total_limit, @duration)
        outcome, fence, = slots.admit(job, place, place_key, at_perform: true)
        unless outcome == :held
          return Over.new(backoff(job), OverLimit.new("concurrency_rule key #{@keying.key_for(job)} is at its " \
                                                      "total_limit of #{@total_limit}"))
        end

        held = slots.running(place_key, job, place, fence)
        result = nil
        begin
          result = yield
        ensure
          result.is_a?(Over) ? slots.keep(held) : slots.release(place_key, held, @total_limit)
        end
      end

      def enqueue_throttle?(job)
        return true unless @enqueue_throttle

        limiter = throttle(@enqueue_throttle, "enqueue", job)
        limiter.within_limit { true }
      rescue OverLimit => e
        raise unless e.limiter.equal?(limiter)

        false
      end

      def limit!(name, value)
        return nil if value.nil?

        option(name) { Validate.positive_integer!(name, value) }
      end

      def within(slots, job)
        result = nil
        over = own_over_limit(slots, delay: backoff(job)) { slots.within_limit { result = yield } }
        over || result
      end

      # An Over when `limiter` refused (its own OverLimit), else nil after the block.
      def own_over_limit(limiter, delay: nil)
        yield
        nil
      rescue OverLimit => e
        raise unless e.limiter.equal?(limiter)

        Over.new(delay || e.retry_after || 1.0, e)
      end

      # By the job's executions (Ferrolock::Backoff: 1, 2, 4 ... s, capped, with jitter).
      def backoff(job)
        Backoff.delay(job.executions)
      end

      def throttle(rule, stage, job)
        count, period = rule
        RateLimiter.window(name(job, stage), count, period, wait_timeout: 0, sliding: true)
      end

      def name(job, stage)
        "rule:#{stage}:#{@keying.key_for(job)}"
      end

      def throttle!(name, value)
        return nil if value.nil?

        count, period, *rest = value.is_a?(Array) ? value : [nil]
        unless rest.empty? && !count.nil? && !period.nil?
          raise ArgumentError, "concurrency_rule #{name}: must be [count, period], got #{Validate.show(value)}"
        end

        option(name) { [Validate.positive_integer!(:count, count), RateLimiter.interval!(period)] }
      end

      def option(name, &block)
        OptionCheck.value("concurrency_rule #{name}:", raise_as: ArgumentError, &block)
      end
    end
  end
end
