# frozen_string_literal: true

require_relative "cli"

# Ferrolock::Admin::CliOutput: the deprecated name of Ferrolock::Admin::Cli::Output, autoloaded on
# first use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::CliOutput = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :CliOutput)
