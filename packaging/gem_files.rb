# frozen_string_literal: true

require "rubygems/package"
require_relative "precompiled_gem"

module Packaging
  # bin/package's check of the gems it built, SOURCE_GEM then each precompiled one: a precompiled gem's
  # metadata names the platform of its file name; it holds the source gem's files less the Rust sources,
  # plus one library per Ruby ABI, and nothing to compile; and RubyGems (Gem::Platform.match_spec?, what
  # `gem install` and Bundler ask) takes it on a Linux (glibc) machine of its CPU and on no other.
  module GemFiles
    class Failed < StandardError; end

    RUST_SOURCES = %r{\A(Cargo\.(toml|lock)\z|ext/)}
    # Gem::Platform.local of Rubies on these machines (RubyGems 3.5+ says "-gnu" on glibc Linux).
    LOCAL_PLATFORMS = %w[
      x86_64-linux x86_64-linux-gnu aarch64-linux aarch64-linux-gnu arm-linux-gnueabihf x86_64-darwin-22
      arm64-darwin-23 x64-mingw-ucrt
    ].freeze

    module_function

    def check(source_path, *precompiled_paths)
      source = Gem::Package.new(source_path).spec
      precompiled_paths.each do |path|
        gem = PrecompiledGem.new(path)
        contents(source, gem)
        platform(source, gem)
      end
    rescue Failed => e
      abort "package: #{e.message}"
    end

    def contents(source, gem)
      expected = source.files.grep_v(RUST_SOURCES) + gem.abis.map { |abi| "lib/ferrolock/#{abi}/ferrolock.so" }
      extra = gem.spec.files - expected
      missing = expected - gem.spec.files
      fail_with(gem, "holds #{extra} beyond the source gem's files") if extra.any?
      fail_with(gem, "lacks #{missing}") if missing.any?
      fail_with(gem, "has extensions #{gem.spec.extensions}") if gem.spec.extensions.any?
      fail_with(gem, "holds a library for no Ruby") if gem.abis.empty?
    end

    def platform(source, gem)
      named = File.basename(gem.path, ".gem").delete_prefix("#{source.full_name}-")
      fail_with(gem, "says platform #{gem.spec.platform} in its metadata") unless gem.spec.platform.to_s == named
      taken = platforms_taking(gem)
      puts "package: #{File.basename(gem.path)}: platform #{named}, Ruby #{gem.abis.join(", ")}; RubyGems " \
           "#{Gem::VERSION} takes it on #{taken.join(", ")}, not on #{(LOCAL_PLATFORMS - taken).join(", ")}"
    end

    # The local platforms RubyGems takes the gem on: exactly Linux on its CPU.
    def platforms_taking(gem)
      expected = LOCAL_PLATFORMS.select { |local| local.start_with?("#{gem.spec.platform.cpu}-linux") }
      taken = LOCAL_PLATFORMS.select { |local| taken_on?(gem.spec, local) }
      fail_with(gem, "is taken on #{taken}, not on #{expected}") unless taken == expected
      taken
    end

    # Whether RubyGems would install the gem on a machine whose local platform is +local+.
    def taken_on?(spec, local)
      saved = Gem.platforms
      Gem.platforms = [Gem::Platform::RUBY, Gem::Platform.new(local)]
      Gem::Platform.match_spec?(spec)
    ensure
      Gem.platforms = saved
    end

    def fail_with(gem, message)
      raise Failed, "#{File.basename(gem.path)} #{message}"
    end
  end
end
