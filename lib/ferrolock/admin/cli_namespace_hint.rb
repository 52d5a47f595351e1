# frozen_string_literal: true

require_relative "cli"

# Ferrolock::Admin::CliNamespaceHint: the deprecated name of Ferrolock::Admin::Cli::NamespaceHint,
# autoloaded on first use (Deprecation.renamed_constants in admin.rb), which logs one warning.
Ferrolock::Admin::CliNamespaceHint = Ferrolock::Deprecation.renamed(Ferrolock::Admin, :CliNamespaceHint)
