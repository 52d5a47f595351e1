# frozen_string_literal: true

require "rubygems/package"

module Packaging
  # What a precompiled gem file holds: its spec and the Ruby ABIs (major.minor) it has a library for.
  class PrecompiledGem
    LIBRARY = %r{\Alib/ferrolock/(\d+\.\d+)/ferrolock\.so\z}

    attr_reader :path, :spec

    def initialize(path)
      @path = path
      @spec = Gem::Package.new(path).spec
    end

    def abis
      spec.files.filter_map { |file| file[LIBRARY, 1] }.sort_by { |abi| Gem::Version.new(abi) }
    end

    def admits?(ruby_version)
      spec.required_ruby_version.satisfied_by?(Gem::Version.new(ruby_version))
    end

    # Ruby versions around the ABIs it holds (each minor from the one below the lowest to the one above
    # the highest, at patch 0 and 9, and the next minor's first preview), each with whether the gem
    # should admit it: exactly when it holds that Ruby's library.
    def expected_admissions
      major = abis.first.split(".").first
      low, high = abis.map { |abi| abi.split(".").last.to_i }.minmax
      expected = (low - 1..high + 1).flat_map { |minor| %W[#{major}.#{minor}.0 #{major}.#{minor}.9] }
                                    .to_h { |ruby| [ruby, abis.include?(ruby[/\A\d+\.\d+/])] }
      expected.merge("#{major}.#{high + 1}.0.preview1" => false)
    end
  end
end
