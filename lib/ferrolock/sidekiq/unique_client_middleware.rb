# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueClientMiddleware: the deprecated name of
# Ferrolock::Sidekiq::Unique::ClientMiddleware, autoloaded on first use
# (Deprecation.renamed_constants in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueClientMiddleware = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueClientMiddleware)
