# frozen_string_literal: true

# Ferrolock::Sidekiq::UniquePush: the deprecated name of Ferrolock::Sidekiq::Unique::Push,
# autoloaded on first use (Deprecation.renamed_constants in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniquePush = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniquePush)
