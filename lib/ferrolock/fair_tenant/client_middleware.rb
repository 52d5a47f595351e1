# frozen_string_literal: true

# Ferrolock::FairTenant::ClientMiddleware: the deprecated name of
# Ferrolock::Sidekiq::FairTenantMiddleware, autoloaded on first use (Deprecation.renamed_constants
# in fair_tenant.rb), which logs one warning.
Ferrolock::FairTenant::ClientMiddleware = Ferrolock::Deprecation.renamed(Ferrolock::FairTenant, :ClientMiddleware)
