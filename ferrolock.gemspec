# frozen_string_literal: true

# Read, not required: Bundler evaluates this file in every `bundle exec`, and
# requiring version.rb there would define Ferrolock in processes that never load it.
version = File.read(File.join(__dir__, "lib/ferrolock/version.rb"))[/VERSION = "([^"]+)"/, 1]

Gem::Specification.new do |spec|
  spec.name = "ferrolock"
  spec.version = version
  spec.authors = ["ferrolock contributors"]
  spec.summary = "Redis coordination for Sidekiq and Shoryuken jobs, with a Rust core."
  spec.description = "A distributed mutex, a dual (until-and-while-executing) lock, a concurrency " \
                     "limiter, fair per-tenant queueing and duplicate-delivery protection, built on " \
                     "leases renewed in Rust and atomic Lua scripts."
  spec.license = "MIT"
  spec.required_ruby_version = ">= 3.0"
  spec.metadata["rubygems_mfa_required"] = "true"

  patterns = %w[
    Cargo.toml Cargo.lock README.md CHANGELOG.md LICENSE
    ext/**/* lib/**/*.rb lib/**/*.lua lib/**/*.erb exe/* sig/**/*
  ]
  generated = %w[Makefile mkmf.log]
  spec.files = Dir.chdir(__dir__) do
    # Tracked files plus new ones not ignored yet; a plain glob outside git.
    listed = `git ls-files -z --cached --others --exclude-standard 2>/dev/null`.split("\x0")
    listed = Dir.glob(patterns) if listed.empty?
    listed.uniq.sort.select do |path|
      File.file?(path) && !generated.include?(File.basename(path)) && !path.include?("/target/") &&
        patterns.any? { |pattern| File.fnmatch?(pattern, path, File::FNM_PATHNAME | File::FNM_EXTGLOB) }
    end
  end

  spec.require_paths = ["lib"]
  spec.bindir = "exe"
  spec.executables = ["ferrolock"]
  spec.extensions = ["ext/ferrolock/extconf.rb"]
end
