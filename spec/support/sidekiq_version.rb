# frozen_string_literal: true

require "rbconfig"
require_relative "rails_version"

module FerrolockTest
  # Which Sidekiq the specs run against: Debian's 6.4.1 gem by default, or, with FERROLOCK_SIDEKIQ=7,
  # the unmodified Sidekiq 7.3.10 (with redis-client and connection_pool) vendored in ../shared/vendor.
  # Their lib folders go first on $LOAD_PATH (this process) and on RUBYLIB (child processes), so every
  # `require "sidekiq"` finds 7.3, and real servers run the vendored bin/sidekiq.
  module SidekiqVersion
    ROOT = File.expand_path("../..", __dir__)
    VENDOR = File.expand_path("../shared/vendor", ROOT)
    SIDEKIQ7 = File.join(VENDOR, "sidekiq-7.3.10")
    SIDEKIQ7_LIBS = [SIDEKIQ7, File.join(VENDOR, "redis-client-0.26.4"),
                     File.join(VENDOR, "connection_pool-2.5.5")].map { |dir| File.join(dir, "lib") }.freeze

    # Spec files that load Sidekiq (tagged :sidekiq; bin/test's rspec_sidekiq7 step runs them on 7.3).
    SPEC_FILES = %r{/spec/(sidekiq_\w+|fair_tenant|boot_checks|loading|readme_snippets|rails_app|configuration|
                           hostile_input|fork_inside_block|release_after_block|web_history(_browser)?)_spec\.rb\z}x

    module_function

    def seven?
      ENV["FERROLOCK_SIDEKIQ"] == "7"
    end

    # The version of the Sidekiq these specs and their child processes run (without loading it): the
    # vendored 7.3.10 with FERROLOCK_SIDEKIQ=7, else the installed gem (6.4.1 on the host, 8.1 in bin/modern).
    def version
      @version ||= if seven?
                     Gem::Version.new(File.read(File.join(SIDEKIQ7, "lib/sidekiq/version.rb"))[/"(\d[^"]*)"/, 1])
                   else
                     Gem::Specification.find_by_name("sidekiq").version
                   end
    end

    def at_least?(required)
      version >= Gem::Version.new(required)
    end

    # Call before anything requires "sidekiq".
    def setup!
      RailsVersion.setup!
      ENV["RUBYLIB"] = rubylib(ENV.fetch("RUBYLIB", nil)) if seven? || RailsVersion.eight_one?
      return unless seven?

      missing = SIDEKIQ7_LIBS.reject { |dir| File.directory?(dir) }
      raise "FERROLOCK_SIDEKIQ=7 needs the vendored copies: #{missing.join(", ")} not found" unless missing.empty?

      $LOAD_PATH.unshift(*SIDEKIQ7_LIBS)
    end

    # RUBYLIB for a child process: the vendored libs first (Sidekiq on 7, Rails on 8.1), then `rest`.
    def rubylib(*rest)
      paths = (seven? ? SIDEKIQ7_LIBS : []) + RailsVersion.libs +
              rest.compact.flat_map { |r| r.split(File::PATH_SEPARATOR) }
      paths.uniq.join(File::PATH_SEPARATOR)
    end

    # The process's client middleware chain: Sidekiq.client_middleware on 6.4, the default
    # configuration's on 7 (which has no Sidekiq.client_middleware).
    def client_middleware(&block)
      return ::Sidekiq.default_configuration.client_middleware(&block) if ::Sidekiq.respond_to?(:default_configuration)

      ::Sidekiq.client_middleware(&block)
    end

    # The command starting a Sidekiq server: Debian's `sidekiq`, or ruby + the vendored bin/sidekiq.
    def server_command
      return [RbConfig.ruby, File.join(SIDEKIQ7, "bin", "sidekiq")] if seven?

      path = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |dir| File.join(dir, "sidekiq") }
                .find { |candidate| File.executable?(candidate) }
      [path || raise("the sidekiq executable is not installed (bin/setup installs ruby-sidekiq)")]
    end
  end
end
