# frozen_string_literal: true

# Ferrolock::Configuration::FAIR_TENANT_MODES: the deprecated name of
# Ferrolock::FairTenant::Config::MODES, autoloaded on first use (Deprecation.renamed_constants in
# configuration.rb), which logs one warning.
Ferrolock::Configuration::FAIR_TENANT_MODES =
  Ferrolock::Deprecation.renamed(Ferrolock::Configuration, :FAIR_TENANT_MODES)
