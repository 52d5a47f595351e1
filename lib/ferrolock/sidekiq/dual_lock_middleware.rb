# frozen_string_literal: true

# Ferrolock::Sidekiq::DualLockMiddleware: the deprecated name of
# Ferrolock::Sidekiq::DualLock::Middleware, autoloaded on first use (Deprecation.renamed_constants
# in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::DualLockMiddleware = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :DualLockMiddleware)
