# frozen_string_literal: true

# Ferrolock::Sidekiq::UniqueOnConflict: the deprecated name of
# Ferrolock::Sidekiq::Unique::OnConflict, autoloaded on first use (Deprecation.renamed_constants in
# sidekiq.rb), which logs one warning.
Ferrolock::Sidekiq::UniqueOnConflict = Ferrolock::Deprecation.renamed(Ferrolock::Sidekiq, :UniqueOnConflict)
