# frozen_string_literal: true

# Read, not required: Bundler evaluates this file in every `bundle exec`, and
# requiring version.rb there would define Ferrolock in processes that never load it.
version = File.read(File.join(__dir__, "lib/ferrolock/version.rb"))[/VERSION = "([^"]+)"/, 1]

# FERROLOCK_PRECOMPILED="3.1 3.3" (bin/package sets it) builds the precompiled gem for this machine's
# platform instead of the source gem: it holds lib/ferrolock/<abi>/ferrolock.so for each Ruby ABI
# listed, compiles nothing at install, and admits only the Rubies of those ABIs. FERROLOCK_PLATFORM
# (e.g. aarch64-linux) names another platform: bin/package builds that gem from a staged copy holding
# the cross-built libraries.
precompiled_abis = ENV.fetch("FERROLOCK_PRECOMPILED", "").split.sort_by { |abi| Gem::Version.new(abi) }
precompiled_libraries = precompiled_abis.map { |abi| "lib/ferrolock/#{abi}/ferrolock.so" }
precompiled_libraries.each do |path|
  next if File.file?(File.join(__dir__, path))

  raise "ferrolock.gemspec: #{path} is missing (rake compile on that Ruby builds it)"
end

# ">= first, < last + 1 minor" minus every minor in between that the gem lacks, so that RubyGems picks
# the source gem there. Requirements are and-ed, so a lacking minor is left out patch by patch (3.2 is
# past its end of life: its patch releases stop below 3.2.20). ".dev" also leaves out the next minor's
# previews, which sort below its release.
ruby_requirement = lambda do |abis|
  minors = abis.map { |abi| abi.split(".").map(&:to_i) }
  first, last = minors.minmax
  lacking = (first[1]..last[1]).map { |minor| [first[0], minor] } - minors
  raise "ferrolock.gemspec: one major version per precompiled gem (#{abis.join(", ")})" if first[0] != last[0]

  [">= #{first.join(".")}", "< #{last[0]}.#{last[1] + 1}.dev"] +
    lacking.flat_map { |major, minor| (0...20).map { |patch| "!= #{major}.#{minor}.#{patch}" } }
end

Gem::Specification.new do |spec|
  spec.name = "ferrolock"
  spec.version = version
  spec.authors = ["ferrolock contributors"]
  spec.summary = "Redis coordination for Sidekiq and Shoryuken jobs, with a Rust core."
  spec.description = "A distributed mutex, a dual (until-and-while-executing) lock, a concurrency " \
                     "limiter, fair per-tenant queueing and duplicate-delivery protection, built on " \
                     "leases renewed in Rust and atomic Lua scripts."
  spec.license = "MIT"
  spec.required_ruby_version = precompiled_abis.empty? ? ">= 3.0" : ruby_requirement.call(precompiled_abis)
  spec.homepage = "https://github.com/ferrolock/ferrolock"
  spec.metadata["homepage_uri"] = spec.homepage
  spec.metadata["source_code_uri"] = spec.homepage
  spec.metadata["changelog_uri"] = "#{spec.homepage}/blob/main/CHANGELOG.md"
  spec.metadata["bug_tracker_uri"] = "#{spec.homepage}/issues"
  spec.metadata["rubygems_mfa_required"] = "true"

  patterns = %w[README.md CHANGELOG.md LICENSE lib/**/*.rb lib/**/*.lua lib/**/*.erb lib/**/*.js exe/* sig/**/*]
  # The sources the install compiles; the precompiled gem has no use for them.
  patterns += %w[Cargo.toml Cargo.lock ext/**/*] if precompiled_abis.empty?
  generated = %w[Makefile mkmf.log]
  spec.files = Dir.chdir(__dir__) do
    # Tracked files plus new ones not ignored yet; a plain glob outside git.
    listed = `git ls-files -z --cached --others --exclude-standard 2>/dev/null`.split("\x0")
    listed = Dir.glob(patterns) if listed.empty?
    listed.uniq.sort.select do |path|
      File.file?(path) && !generated.include?(File.basename(path)) && !path.include?("/target/") &&
        patterns.any? { |pattern| File.fnmatch?(pattern, path, File::FNM_PATHNAME | File::FNM_EXTGLOB) }
    end + precompiled_libraries
  end

  spec.require_paths = ["lib"]
  spec.bindir = "exe"
  spec.executables = ["ferrolock"]
  if precompiled_abis.empty?
    spec.extensions = ["ext/ferrolock/extconf.rb"]
  else
    # x86_64-linux on glibc, as rubygems.org names it (RubyGems 4 calls the local one x86_64-linux-gnu);
    # FERROLOCK_PLATFORM: another machine's (bin/package's cross-built aarch64-linux gem).
    local = Gem::Platform.local
    local = Gem::Platform.new("#{local.cpu}-#{local.os}") if local.version == "gnu"
    spec.platform = ENV["FERROLOCK_PLATFORM"] ? Gem::Platform.new(ENV["FERROLOCK_PLATFORM"]) : local
  end
end
