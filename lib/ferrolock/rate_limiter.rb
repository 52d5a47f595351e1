# frozen_string_literal: true

module Ferrolock
  # At most `count` calls per `interval` seconds, across threads, processes and hosts, counted in
  # Redis time (Sidekiq Enterprise's rate limiter API). Create it once (a constant) and reuse it;
  # it is thread-safe. Nothing is held while the block runs: a call uses up a slot when it starts.
  # A caller that must wait reserves its slot in the same script (first come, first served) and
  # sleeps until it: no second attempt, and no later caller can take its turn.
  #
  #   API = Ferrolock::RateLimiter.window("partner-api", 10, :second)
  #   API.within_limit { call_partner }   # waits for the next slot, up to wait_timeout (5 s)
  #
  # Kinds (see ext/ferrolock-core/src/rate_limiter.rs):
  # - window: fixed windows aligned to Redis time; sliding: true counts ANY interval-long span
  # - bucket: bursts of up to `count`, refilled continuously at count per interval
  # - leaky: calls evenly spaced interval/count apart (plus `burst` extra at once)
  # - points: a bucket of `count` points refilled continuously; within_limit(cost) spends cost
  class RateLimiter
    # Sidekiq Enterprise's interval names.
    INTERVALS = { second: 1, minute: 60, hour: 3600, day: 86_400 }.freeze
    # WaitTimeout's keep: a rate limiter's grant needs no record (a grant an exception cut short is
    # refunded by give_back).
    KEEP_NOTHING = ->(_) {}
    private_constant :KEEP_NOTHING

    attr_reader :name, :kind, :count, :interval, :wait_timeout, :client
    # Extra calls a leaky limiter lets through at once (0 for the other kinds); read by the
    # operators' view (Admin::RateInfo).
    attr_reader :burst

    class << self
      def window(name, count, interval, wait_timeout: 5, sliding: false, client: nil) # rubocop:disable Metrics/ParameterLists -- keywords with defaults
        sliding = Validate.boolean!(:sliding, sliding)
        new(name, sliding ? :sliding_window : :window, count, interval, wait_timeout: wait_timeout, client: client)
      end

      def bucket(name, count, interval, wait_timeout: 5, client: nil)
        new(name, :bucket, count, interval, wait_timeout: wait_timeout, client: client)
      end

      # burst: calls beyond the evenly spaced ones that may go ahead at once (0: none).
      def leaky(name, count, interval, wait_timeout: 5, burst: 0, client: nil) # rubocop:disable Metrics/ParameterLists -- keywords with defaults
        new(name, :leaky, count, interval, wait_timeout: wait_timeout, burst: burst, client: client)
      end

      # A budget of `points` per interval (a bucket of points refilled continuously): each
      # within_limit(cost) spends `cost` points (1 to points).
      def points(name, points, interval, wait_timeout: 5, client: nil)
        points = Validate.positive_integer!(:points, points) # named as the caller knows it, not "count"
        new(name, :points, points, interval, wait_timeout: wait_timeout, client: client)
      end

      # An interval in seconds: a number, or :second, :minute, :hour, :day.
      def interval!(value)
        case value # not value.is_a?: a BasicObject has none, and must end in Validate's TypeError
        when Symbol
          return INTERVALS.fetch(value).to_f if INTERVALS.key?(value)

          raise ArgumentError, "interval must be seconds or one of #{INTERVALS.keys.inspect}, got #{value.inspect}"
        else Validate.seconds!(:interval, value)
        end
      end
    end

    # Use RateLimiter.window, .bucket, .leaky or .points.
    def initialize(name, kind, count, interval, wait_timeout: 5, burst: 0, client: nil) # rubocop:disable Metrics/ParameterLists -- all keywords with defaults
      @name = Validate.name!(:name, name)
      @kind = kind
      @count = Validate.positive_integer!(:count, count)
      @interval = self.class.interval!(interval)
      @wait_timeout = Validate.seconds!(:wait_timeout, wait_timeout, allow_zero: true)
      @burst = Validate.count!(:burst, burst, min: 0)
      @client = Validate.client!(client)
      @native = Backend.build(:RateLimiter, @client, @name, kind.to_s, @count, @interval, @burst)
      # For the operators' view (Admin::RateInfo), while this limiter lives: Redis holds its state,
      # not its count or interval. Kept by the native object, so the app's constants stay however
      # many short-lived limiters come and go (a bounded most-recent list would drop them).
      @native.record_definition
      # Made once: WaitTimeout.acquire calls it with the call's wait_timeout and start.
      @stalled = method(:stalled_over_limit)
    end
    private_class_method :new

    # Runs the block once the call has a slot and returns its value. If the next slot opens
    # within wait_timeout seconds (0: don't wait), the script reserves it and the call sleeps
    # until it; else raises Ferrolock::OverLimit at once, with #retry_after the seconds until
    # that slot. `cost`: points the call spends (a points limiter only; 1 for the others).
    def within_limit(cost = 1, wait_timeout: @wait_timeout)
      raise ArgumentError, "within_limit needs a block" unless block_given?

      cost = cost!(cost)
      wait_timeout = Validate.seconds!(:wait_timeout, wait_timeout, allow_zero: true)
      acquire(cost, wait_timeout)
      yield
    end

    # { remaining:, reset_in:, limit:, interval: } read from Redis: calls that would go ahead now
    # and the seconds until the limiter is back to its full count if no call comes.
    def status
      remaining, reset_in = @native.status
      { remaining: remaining, reset_in: reset_in, limit: @count, interval: @interval }
    end

    # The Redis key holding this limiter's state.
    def key
      @native.key
    end

    def inspect
      "#<#{self.class.name} #{@kind} #{@name.inspect} count=#{@count} interval=#{@interval} " \
        "wait_timeout=#{@wait_timeout}>"
    end

    private

    def cost!(cost)
      cost = Validate.positive_integer!(:cost, cost)
      return cost if cost == 1
      raise ArgumentError, "cost must be 1 (only a points limiter charges more), got #{cost}" if @kind != :points
      raise ArgumentError, "cost must be at most the limiter's #{@count} points, got #{cost}" if cost > @count

      cost
    end

    def acquire(cost, wait_timeout)
      started = Ferrolock.monotonic
      # A wait ended by an exception gives its slot back natively; a slot granted just as an
      # exception arrived is given back here (the block will not run).
      give_back = ->(reply) { @native.refund(reply[3], cost) if reply[0] }
      granted, at, remaining =
        WaitTimeout.acquire(@stalled, wait_timeout, started, keep: KEEP_NOTHING, give_back: give_back) do
          @native.acquire(cost, wait_timeout)
        end
      waited = Ferrolock.monotonic - started
      return instrument(:acquired, waited: waited, granted_at: at, remaining: remaining, cost: cost) if granted

      instrument(:over_limit, waited: waited, retry_after: at)
      raise OverLimit.new("RateLimiter #{@name.inspect} (#{@kind}, #{@count} per #{@interval} s): next slot in " \
                          "#{at.round(3)} s, past wait_timeout #{wait_timeout} s", limiter: self, retry_after: at)
    end

    # Redis stalled past wait_timeout (see WaitTimeout): when the next slot opens is unknown.
    def stalled_over_limit(wait_timeout, started)
      instrument(:over_limit, waited: Ferrolock.monotonic - started, retry_after: nil)
      OverLimit.new("RateLimiter #{@name.inspect}: Redis did not answer within wait_timeout (#{wait_timeout} s)",
                    limiter: self)
    end

    def instrument(event, **payload)
      Ferrolock.instrument(event, primitive: :rate_limiter, kind: @kind, name: @name, limit: @count, **payload)
    end
  end
end
