# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueMiddleware: the deprecated name of
# Ferrolock::Sidekiq::Unique::Middleware, autoloaded on first use (Deprecation.renamed_constants in
# sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueMiddleware = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueMiddleware)
