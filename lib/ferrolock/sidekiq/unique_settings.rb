# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueSettings: the deprecated name of Ferrolock::Sidekiq::Unique::Settings,
# autoloaded on first use (Deprecation.renamed_constants in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueSettings = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueSettings)
