# frozen_string_literal: true

# Loads the compiled library: the one for this Ruby's ABI where there is one (the precompiled gem holds
# one per Ruby version, lib/ferrolock/<major.minor>/, as the development repo does), else the one
# `gem install` compiled from the source gem.
abi = RUBY_VERSION[/\A\d+\.\d+/]
dlext = RbConfig::CONFIG.fetch("DLEXT")
abi_library = File.join(__dir__, abi, "ferrolock")
begin
  if File.exist?("#{abi_library}.#{dlext}")
    require abi_library
  else
    begin
      require "ferrolock/ferrolock"
    rescue LoadError
      require_relative "ferrolock"
    end
  end
rescue LoadError => e
  # Libraries for other Rubies only (a precompiled gem on a Ruby it lacks), or one this system cannot
  # load (an older glibc than it was built against): say what is there and how to get a working one.
  held = Dir[File.join(__dir__, "*", "ferrolock.#{dlext}")].map { |path| File.basename(File.dirname(path)) }
  raise if held.empty?

  raise LoadError, "ferrolock #{Ferrolock::VERSION} has no loadable compiled library for Ruby #{RUBY_VERSION}: " \
                   "it holds Ruby #{held.sort.join(" and ")}'s only (#{e.message}). Install the source gem, " \
                   "which compiles at install (needs Rust, ruby-dev and libclang): " \
                   "gem install ferrolock --platform ruby; in a checkout, run rake compile"
end
