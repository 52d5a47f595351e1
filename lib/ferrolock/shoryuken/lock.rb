# frozen_string_literal: true

# Ferrolock::Shoryuken::Lock: the deprecated name of Ferrolock::Shoryuken::LockMiddleware,
# autoloaded on first use (Deprecation.renamed_constants in shoryuken.rb), which logs one warning.
Ferrolock::Shoryuken::Lock = Ferrolock::Deprecation.renamed(Ferrolock::Shoryuken, :Lock)
