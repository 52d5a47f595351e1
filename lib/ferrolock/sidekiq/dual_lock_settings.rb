# frozen_string_literal: true

# Ferrolock::Sidekiq::DualLockSettings: the deprecated name of
# Ferrolock::Sidekiq::DualLock::Settings, autoloaded on first use (Deprecation.renamed_constants in
# sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::DualLockSettings = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :DualLockSettings)
