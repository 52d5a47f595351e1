# frozen_string_literal: true

module Ferrolock
  # The bridge to ActiveSupport::Notifications: every event Ferrolock.instrument sends, of any kind,
  # is also published as "<event>.ferrolock" (acquired.ferrolock, blocked.ferrolock ...) with the
  # same payload, when ActiveSupport::Notifications is loaded and something listens to that name.
  # Ferrolock never loads ActiveSupport itself. Nobody listening costs one notifier lookup per event.
  module Notifications
    SUFFIX = ".ferrolock"

    # The names of Ferrolock::EVENTS, made once; a kind added later gets its name on the fly.
    NAMES = EVENTS.to_h { |event| [event, "#{event}#{SUFFIX}".freeze] }.freeze
    private_constant :NAMES

    class << self
      # "acquired.ferrolock" for :acquired: the one naming rule.
      def name_of(event)
        NAMES.fetch(event) { "#{event}#{SUFFIX}" }
      end

      # True when ActiveSupport::Notifications is loaded and something listens to event's name (in a
      # Rails app it is always loaded; most events have no listener). No rescue here: it runs
      # unmasked, where a rescue would swallow an asynchronous exception (Thread#raise, Timeout).
      def listening?(event)
        return false unless loaded?

        notifier = ::ActiveSupport::Notifications.notifier
        # A notifier that cannot tell: publish, as before.
        !notifier.respond_to?(:listening?) || notifier.listening?(name_of(event))
      end

      # Publishes event; runs inside Ferrolock.instrument's deferral of asynchronous exceptions, so
      # only a listener's own failure lands in the rescue.
      def publish(event, payload)
        return unless loaded?

        ::ActiveSupport::Notifications.instrument(name_of(event), payload)
      rescue StandardError => e
        Ferrolock.log(:warn, "ferrolock: ActiveSupport::Notifications for #{event} failed: #{e.class}: #{e.message}")
      end

      private

      # Whether ActiveSupport::Notifications may be there (const_defined?, not defined?: defined?
      # would swallow an asynchronous exception landing while it evaluates). Once loaded it stays,
      # so a true answer is kept: every event asks.
      def loaded?
        @loaded ||= Object.const_defined?(:ActiveSupport, false) &&
                    ::ActiveSupport.const_defined?(:Notifications, false)
      end
    end
  end
end
