# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueServerMiddleware: the deprecated name of
# Ferrolock::Sidekiq::Unique::ServerMiddleware, autoloaded on first use
# (Deprecation.renamed_constants in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueServerMiddleware = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueServerMiddleware)
