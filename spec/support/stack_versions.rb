# frozen_string_literal: true

require "json"
require "open3"
require_relative "rails_version"

module FerrolockTest
  # The versions one test stack runs (the host's; bin/modern's chroot when FERROLOCK_STACK=modern; its
  # Ruby 3.4 lane when FERROLOCK_STACK=ruby34), read from the machine, and README.md's "Supported
  # versions" table made from every stack's versions.
  # bin/versions prints them and rewrites the table; spec/supported_versions_spec.rb checks the table
  # against the stack it runs on.
  module StackVersions
    ROOT = File.expand_path("../..", __dir__)
    README = File.join(ROOT, "README.md")
    SIDEKIQ7_VERSION_RB = File.expand_path("../shared/vendor/sidekiq-7.3.10/lib/sidekiq/version.rb", ROOT)
    BEGIN_MARK = "<!-- supported-versions: begin (bin/versions --readme writes this table) -->"
    END_MARK = "<!-- supported-versions: end -->"
    STACKS = {
      "host" => "`bin/test` on the host: steps `rspec`, `rspec_sidekiq7`, `chaos`, `gem_install`",
      "modern" => "`bin/test modern` (bin/modern-test, in a Debian testing chroot)",
      "ruby34" => "`bin/test modern`, steps `rspec_ruby34`, `chaos_ruby34`, `cargo_redis86` " \
                  "(the same chroot, Debian experimental)"
    }.freeze
    # Ruby 4.0: in no Debian suite (nor any other package source) these machines reach; not claimed.
    NOT_PACKAGED = "Ruby 4.0"
    ROWS = { "os" => "OS", "ruby" => "Ruby", "sidekiq" => "Sidekiq", "rails" => "ActiveJob / railties",
             "redis" => "Redis (`redis-server`)", "valkey" => "Valkey (`valkey-server`)" }.freeze

    module_function

    def stack
      STACKS.key?(ENV.fetch("FERROLOCK_STACK", nil)) ? ENV.fetch("FERROLOCK_STACK") : "host"
    end

    # This stack's versions, by ROWS key ("—" when absent). The Ruby 3.4 lane runs ActiveJob but no Rails
    # app (Debian builds nokogiri, which railties needs, for Ruby 3.3 only), no vendored Sidekiq 7.3 and
    # no Valkey: those run on Ruby 3.3 beside it.
    def current
      ruby34 = stack == "ruby34"
      {
        "os" => os, "ruby" => RUBY_VERSION, "sidekiq" => sidekiq(vendored: !ruby34),
        "rails" => ruby34 ? "#{gem_version("activejob")} (ActiveJob only)" : rails(vendored: stack == "modern"),
        "redis" => server_version("redis-server"), "valkey" => ruby34 ? "—" : server_version("valkey-server")
      }
    end

    def os
      File.read("/etc/os-release")[/^PRETTY_NAME="?([^"\n]*)/, 1] || "—"
    rescue SystemCallError
      "—"
    end

    # The installed Sidekiq, and the vendored 7.3 the `rspec_sidekiq7` steps run too.
    def sidekiq(vendored: true)
      vendored &&= File.exist?(SIDEKIQ7_VERSION_RB) && File.read(SIDEKIQ7_VERSION_RB)[/VERSION = "([^"]+)"/, 1]
      [gem_version("sidekiq"), ("#{vendored} (vendored)" if vendored)].compact.join(", ")
    end

    # The installed railties, and the vendored Rails 8.1 bin/modern-test's `rails81` step runs (Ruby >= 3.2).
    def rails(vendored:)
      version_rb = File.join(RailsVersion::VENDOR, "railties/lib/rails/gem_version.rb")
      vendored &&= File.exist?(version_rb) &&
                   File.read(version_rb).scan(/(?:MAJOR|MINOR|TINY|PRE)\s*=\s*"?(\w+)"?/).join(".")
      [gem_version("railties"), ("#{vendored} (vendored)" if vendored)].compact.join(", ")
    end

    def gem_version(name)
      Gem::Specification.find_by_name(name).version.to_s
    rescue Gem::MissingSpecError
      "—"
    end

    # "Redis server v=8.0.6 …" / "Valkey server v=9.1.2 …"
    def server_version(command)
      command_version(command, "--version")[/\bv=(\S+)/, 1] || "—"
    end

    def command_version(*command)
      out, status = Open3.capture2e(*command)
      status.success? ? out : ""
    rescue SystemCallError
      ""
    end

    # The Markdown table: one column per stack.
    def table(by_stack)
      header = "| | #{STACKS.keys.map { |name| STACKS.fetch(name) }.join(" | ")} |"
      rule = "|---|#{STACKS.keys.map { "---" }.join("|")}|"
      rows = ROWS.map do |key, label|
        "| #{label} | #{STACKS.keys.map { |name| by_stack.fetch(name).fetch(key) }.join(" | ")} |"
      end
      [header, rule, *rows].join("\n")
    end

    # The table now in README.md, as { stack => { row key => cell } }.
    def readme_table(text = File.read(README))
      body = text[/#{Regexp.escape(BEGIN_MARK)}\n(.*?)#{Regexp.escape(END_MARK)}/m, 1]
      raise "README.md has no supported-versions markers" unless body

      rows = body.lines.drop(2).map { |line| line.strip.delete_prefix("|").delete_suffix("|").split("|").map(&:strip) }
      STACKS.keys.each_with_index.to_h do |name, column|
        [name, ROWS.keys.zip(rows).to_h { |key, cells| [key, cells.fetch(column + 1)] }]
      end
    end

    # A cell with its versions cut to major.minor ("8.1.7, 7.3.10 (vendored)" → "8.1, 7.3 (vendored)"):
    # what the spec compares, so a Debian patch release does not fail the suite.
    def minor(cell)
      cell.gsub(/\b(\d+\.\d+)(?:\.\d+)+\b/, '\1')
    end

    # README.md with the table replaced.
    def rewrite(text, by_stack)
      text.sub(/#{Regexp.escape(BEGIN_MARK)}\n.*?#{Regexp.escape(END_MARK)}/m) do
        "#{BEGIN_MARK}\n#{table(by_stack)}\n#{END_MARK}"
      end
    end
  end
end
