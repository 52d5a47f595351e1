# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueUnsupported: the deprecated name of
# Ferrolock::Sidekiq::Unique::Unsupported, autoloaded on first use (Deprecation.renamed_constants in
# sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueUnsupported = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueUnsupported)
