# frozen_string_literal: true

require_relative "cli"

# Ferrolock::Admin::CliArguments: the deprecated name of Ferrolock::Admin::Cli::Arguments,
# autoloaded on first use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::CliArguments = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :CliArguments)
