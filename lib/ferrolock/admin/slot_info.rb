# frozen_string_literal: true

# Ferrolock::Admin::SlotInfo: the deprecated name of Ferrolock::Admin::LeaseInfo, autoloaded on
# first use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::SlotInfo = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :SlotInfo)
