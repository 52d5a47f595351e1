# frozen_string_literal: true

# Events: Ferrolock.subscribe, Ferrolock.unsubscribe and Ferrolock.instrument.
module Ferrolock
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
  private_constant :SUBSCRIBERS_LOCK
  @subscribers = [].freeze

  class << self
    # Ferrolock.subscribe { |event, payload| ... } receives every event;
    # Ferrolock.subscribe(:acquired, :waited) { ... } only those named.
    def subscribe(*events, &block)
      raise ArgumentError, "subscribe needs a block" unless block

      subscription = Subscription.new(events.map(&:to_sym).freeze, block)
      SUBSCRIBERS_LOCK.synchronize { @subscribers = (@subscribers + [subscription]).freeze }
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
    def instrument(event, payload = {})
      event = event.to_sym
      @subscribers.each do |subscription|
        next unless subscription.match?(event)

        begin
          subscription.call(event, payload)
        rescue StandardError => e
          logger.warn("ferrolock: #{event} subscriber failed: #{e.class}: #{e.message}")
        end
      end
      publish_notification(event, payload)
      nil
    end

    private

    def publish_notification(event, payload)
      return unless defined?(::ActiveSupport::Notifications)

      ::ActiveSupport::Notifications.instrument("#{event}.ferrolock", payload)
    rescue StandardError => e
      logger.warn("ferrolock: ActiveSupport::Notifications for #{event} failed: #{e.class}: #{e.message}")
    end
  end
end
