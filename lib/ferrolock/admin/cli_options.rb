# frozen_string_literal: true

require_relative "cli"

# Ferrolock::Admin::CliOptions: the deprecated name of Ferrolock::Admin::Cli::Options, autoloaded on
# first use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::CliOptions = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :CliOptions)
