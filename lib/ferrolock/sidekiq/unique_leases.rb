# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueLeases: the deprecated name of Ferrolock::Sidekiq::Unique::Leases,
# autoloaded on first use (Deprecation.renamed_constants in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueLeases = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueLeases)
