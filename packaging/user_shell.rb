# frozen_string_literal: true

require "fileutils"
require "open3"
require "rbconfig"

module Packaging
  # Runs commands as a user without Rust would: `env -i` with PATH=/usr/bin:/bin (no cargo there) and a
  # scratch HOME, so nothing of the caller's environment (Bundler, RUBYLIB, ~/.cargo) leaks in.
  # `ruby`, `gem` and `bundle` are the Ruby running this one's: a folder first on PATH links them to its
  # versioned commands (Debian's ruby3.4, gem3.4, bundle3.4 beside a /usr/bin/ruby that is 3.3).
  class UserShell
    SYSTEM_PATH = "/usr/bin:/bin"
    COMMANDS = %w[ruby gem bundle].freeze

    attr_reader :path

    def initialize(home)
      @home = home
      bin = FileUtils.mkdir_p(File.join(home, "ruby-bin")).first
      suffix = RbConfig::CONFIG.fetch("ruby_install_name").delete_prefix("ruby")
      COMMANDS.each do |name|
        target = File.join(RbConfig::CONFIG.fetch("bindir"), "#{name}#{suffix}")
        target = RbConfig.ruby if name == "ruby"
        File.symlink(target, File.join(bin, name)) if File.executable?(target)
      end
      @path = "#{bin}:#{SYSTEM_PATH}"
    end

    # The command's output (stdout and stderr) and whether it succeeded.
    def run(*command, env: {}, chdir: @home)
      settings = { "PATH" => path, "HOME" => @home }.merge(env).map { |name, value| "#{name}=#{value}" }
      output, status = Open3.capture2e("env", "-i", *settings, *command, chdir: chdir)
      [output, status.success?]
    end

    # The first of the names found on PATH, nil when none is.
    def find_command(*names)
      names.product(path.split(":")).map { |name, dir| File.join(dir, name) }.find { |found| File.executable?(found) }
    end
  end
end
