# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueLock: the deprecated name of Ferrolock::Sidekiq::Unique::Lock,
# autoloaded on first use (Deprecation.renamed_constants in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueLock = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueLock)
