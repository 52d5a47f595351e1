# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueOptionNames: the deprecated name of
# Ferrolock::Sidekiq::Unique::OptionNames, autoloaded on first use (Deprecation.renamed_constants in
# sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueOptionNames = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueOptionNames)
