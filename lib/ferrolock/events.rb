# frozen_string_literal: true

require_relative "deprecation"

# Events: Ferrolock.subscribe, Ferrolock.unsubscribe and Ferrolock.instrument.
module Ferrolock
  # Ferrolock extends this module; EVENTS (lib/ferrolock.rb) names the events.
  module Events
    # A block registered with Ferrolock.subscribe; pass it to Ferrolock.unsubscribe.
    class Subscription
      attr_reader :events

      def initialize(events, block)
        @events = events
        @block = block
      end

      def match?(event)
        events.empty? || events.include?(event)
      end

      def call(event, payload)
        @block.call(event, payload)
      end
    end

    SUBSCRIBERS_LOCK = Mutex.new
    # instrument's interrupt mask, made once (it runs for every event someone listens to).
    DEFERRED = { Object => :never }.freeze
    private_constant :SUBSCRIBERS_LOCK, :DEFERRED

    # Ferrolock.subscribe { |event, payload| ... } receives every event;
    # Ferrolock.subscribe(:acquired, :wait_timeout) { ... } only those named (see EVENTS).
    def subscribe(*events, &block)
      raise ArgumentError, "subscribe needs a block" unless block

      subscription = Subscription.new(event_names!(events), block)
      SUBSCRIBERS_LOCK.synchronize { @subscribers = (@subscribers + [subscription]).freeze }
      # Losses found by lease renewal are reported by a thread of their own (LockLostWatcher).
      LockLostWatcher.ensure_started if subscription.match?(:lock_lost) || subscription.match?(:data_lost)
      subscription
    end

    # Returns true when the subscription was registered.
    def unsubscribe(subscription)
      SUBSCRIBERS_LOCK.synchronize do
        before = @subscribers.size
        @subscribers = (@subscribers - [subscription]).freeze
        @subscribers.size != before
      end
    end

    # Calls every matching subscriber; a failing subscriber is logged, never raised.
    # Asynchronous exceptions (Thread#raise, Timeout, Thread#kill) wait until the subscribers are
    # done: landing inside, the rescue below would log and swallow them. Keep subscribers quick.
    def instrument(event, payload = {})
      # (Symbol === event: Module#===, BasicObject-safe; saves a call per event on the hot path.)
      event = event_symbol!("instrument: event", "a Symbol", event) unless Symbol === event # rubocop:disable Style/CaseEquality
      recorder = @recorder
      subscribed = subscribed?(event)
      # Nobody listens (the usual case on a hot path): no interrupt mask to enter and leave.
      return nil unless subscribed || recorder

      payload = canonical_payload(payload)
      recorder&.record(event, payload)
      publish(event, payload) if subscribed
      nil
    end

    # True when a subscriber or an ActiveSupport::Notifications listener would receive event. A hot
    # path asks before it builds a payload nobody reads. Without ActiveSupport (`defined?` of a
    # top-level constant: one VM instruction, no method call and no rescue that could swallow an
    # asynchronous exception) Notifications is not asked: its calls cost a DistMutex cycle about
    # 1 µs each on a loaded machine (doc/BENCHMARKS.md, history).
    # (The same look as audience's: History's recorder counts as a listener.)
    def listening?(event)
      !audience(event).nil?
    end

    # True when a subscriber or an ActiveSupport::Notifications listener may receive event (History
    # aside): a DistMutex or ConcurrentLimiter that only History listens to counts its :acquired and
    # :released in its History::Counter, with no payload built.
    def subscribed?(event)
      !@subscribers.empty? || (defined?(::ActiveSupport) && Notifications.listening?(event))
    end

    # Who receives event, in one look for a hot path that counts it (DistMutex, ConcurrentLimiter):
    # nil, nobody; :history, History alone (the primitive's History::Counter counts it, no payload
    # built); :all, a subscriber or an ActiveSupport::Notifications listener (Ferrolock.instrument,
    # which History counts too when on).
    def audience(event)
      # (empty? first: an optimized instruction, where any? is a call with a block.)
      if (!@subscribers.empty? && @subscribers.any? { |subscription| subscription.match?(event) }) ||
         (defined?(::ActiveSupport) && Notifications.listening?(event))
        return :all
      end

      :history unless @recorder.nil?
    end

    # History.apply's switch (internal): recorder.record(event, payload) sees every event, or nil.
    def record_events_with(recorder)
      @recorder = recorder
    end

    private

    def publish(event, payload)
      Thread.handle_interrupt(DEFERRED) do
        @subscribers.each do |subscription|
          next unless subscription.match?(event)

          begin
            subscription.call(event, payload)
          rescue StandardError => e # only the subscriber's own: asynchronous ones are deferred (instrument)
            logger.warn("ferrolock: #{event} subscriber failed: #{e.class}: #{e.message}")
          end
        end
        Notifications.publish(event, payload) if Notifications.listening?(event)
      end
    end

    # Every payload names its lock :name and its job's class :job_class; the older keys (:key,
    # :class, :worker) stay beside them for now (deprecated, see the README's vocabulary table).
    def canonical_payload(payload)
      return payload unless Hash === payload # rubocop:disable Style/CaseEquality -- payload may be a BasicObject

      name = payload.key?(:key) && !payload.key?(:name)
      job_class = job_class_of(payload)
      return payload unless name || job_class # the usual case: nothing to add, nothing allocated

      extra = {}
      extra[:name] = payload[:key] if name
      extra[:job_class] = payload[job_class] if job_class
      payload.merge(extra)
    end

    # The older key that holds the job's class, when :job_class is missing.
    def job_class_of(payload)
      return nil if payload.key?(:job_class)
      return :class if payload.key?(:class)

      :worker if payload.key?(:worker)
    end

    def event_names!(events)
      events.map do |event|
        name = event_symbol!("subscribe: event names", "Symbols", event)
        next name if EVENTS.include?(name)

        raise ArgumentError, "subscribe: unknown event #{Validate.show(name)} (known: #{EVENTS.join(", ")})"
      end.freeze
    end

    # An event name as a Symbol: a Symbol, or a String as UTF-8 (to_sym raises on bytes that are
    # not UTF-8, and a UTF-16 "acquired" would be another Symbol). Tested with `case`: a
    # BasicObject has no methods to ask (Validate's rule).
    def event_symbol!(arg, type, event)
      case event
      when Symbol then event
      when String then Validate.utf8!(arg, event).to_sym
      else raise TypeError, "#{arg} must be #{type}, got #{Validate.show(event)}"
      end
    end
  end

  @subscribers = [].freeze
  # History's counter while history is on (History.apply): every event goes to it before the
  # subscribers and outside their interrupt mask, which costs more than the count (a count lost to
  # Thread#raise is one count).
  @recorder = nil
  extend Events
  # Subscription: its name before it moved into Events (deprecated).
  Deprecation.renamed_constants(self, Subscription: "Ferrolock::Events::Subscription")
end
