# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueResumption: the deprecated name of
# Ferrolock::Sidekiq::Unique::Resumption, autoloaded on first use (Deprecation.renamed_constants in
# sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueResumption = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueResumption)
