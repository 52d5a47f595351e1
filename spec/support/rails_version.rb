# frozen_string_literal: true

module FerrolockTest
  # Which Rails the specs run against: the installed gems by default (Debian's 6.1 on the host, 7.2 in
  # bin/modern), or, with FERROLOCK_RAILS=8.1, the unmodified Rails 8.1.3.1 vendored in ../shared/vendor
  # (activesupport, activejob, activemodel, actionpack, actionview, railties; Ruby >= 3.2, so bin/modern
  # only). Their lib folders go first on $LOAD_PATH and on RUBYLIB (child processes: Sidekiq servers,
  # run_ruby), ahead of the bundle's, as SidekiqVersion does for Sidekiq 7.3.
  module RailsVersion
    VENDOR = File.expand_path("../../../shared/vendor/rails-8.1.3.1", __dir__)
    FRAMEWORKS = %w[activesupport activejob activemodel actionpack actionview railties].freeze

    module_function

    def eight_one?
      ENV["FERROLOCK_RAILS"] == "8.1"
    end

    def libs
      eight_one? ? FRAMEWORKS.map { |name| File.join(VENDOR, name, "lib") } : []
    end

    # Call before anything requires active_support.
    def setup!
      return unless eight_one?

      missing = libs.reject { |dir| File.directory?(dir) }
      raise "FERROLOCK_RAILS=8.1 needs the vendored Rails: #{missing.join(", ")} not found" unless missing.empty?

      $LOAD_PATH.unshift(*libs)
    end
  end
end
