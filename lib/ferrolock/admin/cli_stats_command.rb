# frozen_string_literal: true

require_relative "cli"

# Ferrolock::Admin::CliStatsCommand: the deprecated name of Ferrolock::Admin::Cli::StatsCommand,
# autoloaded on first use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::CliStatsCommand = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :CliStatsCommand)
