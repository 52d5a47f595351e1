# frozen_string_literal: true

require_relative "cli"

# Ferrolock::Admin::CliApp: the deprecated name of Ferrolock::Admin::Cli::App, autoloaded on first
# use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::CliApp = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :CliApp)
