# frozen_string_literal: true

# Ferrolock::Admin::Stage: the deprecated name of Ferrolock::Admin::LeaseInfo, autoloaded on first
# use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::Stage = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :Stage)
