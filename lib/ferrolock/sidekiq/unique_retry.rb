# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueRetry: the deprecated name of Ferrolock::Sidekiq::Unique::Retry,
# autoloaded on first use (Deprecation.renamed_constants in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueRetry = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueRetry)
