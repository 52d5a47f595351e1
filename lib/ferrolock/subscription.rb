# frozen_string_literal: true

# Ferrolock::Subscription: the deprecated name of Ferrolock::Events::Subscription, autoloaded on
# first use (Deprecation.renamed_constants in events.rb), which logs one warning.
Ferrolock::Subscription = Ferrolock::Deprecation.renamed(Ferrolock, :Subscription)
