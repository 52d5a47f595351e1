# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueDigest: the deprecated name of Ferrolock::Sidekiq::Unique::Digest,
# autoloaded on first use (Deprecation.renamed_constants in sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueDigest = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueDigest)
