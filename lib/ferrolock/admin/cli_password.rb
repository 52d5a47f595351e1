# frozen_string_literal: true

require_relative "cli"

# Ferrolock::Admin::CliPassword: the deprecated name of Ferrolock::Admin::Cli::Password, autoloaded
# on first use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::CliPassword = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :CliPassword)
