# frozen_string_literal: true

require "fileutils"
require "rubygems/package"
require "zlib"

module Packaging
  # A gem source in a directory, laid out as a gem server serves it (gems/, quick/Marshal.4.8/ and the
  # specs indexes), so `gem install --source file://DIR/` and Bundler's `source "file://DIR/"` resolve
  # from it as they would from rubygems.org: among every variant of a version.
  class GemSource
    attr_reader :dir

    def initialize(dir, gem_files)
      @dir = dir
      @specs = gem_files.to_h { |path| [path, Gem::Package.new(path).spec] }
    end

    def url
      "file://#{dir}/"
    end

    def write
      FileUtils.mkdir_p([File.join(dir, "gems"), File.join(dir, "quick", "Marshal.4.8")])
      @specs.each { |path, spec| add(path, spec) }
      tuples = @specs.values.map { |spec| [spec.name, spec.version, spec.platform.to_s] }
      { "specs" => tuples, "latest_specs" => tuples, "prerelease_specs" => [] }.each do |name, list|
        Zlib::GzipWriter.open(File.join(dir, "#{name}.4.8.gz")) { |gz| gz.write(Marshal.dump(list)) }
      end
      self
    end

    private

    def add(path, spec)
      FileUtils.cp(path, File.join(dir, "gems", "#{spec.full_name}.gem"))
      quick = File.join(dir, "quick", "Marshal.4.8", "#{spec.full_name}.gemspec.rz")
      File.binwrite(quick, Gem.deflate(Marshal.dump(spec)))
    end
  end
end
