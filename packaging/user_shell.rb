# frozen_string_literal: true

require "open3"

module Packaging
  # Runs commands as a user without Rust would: `env -i` with PATH=/usr/bin:/bin (no cargo there) and a
  # scratch HOME, so nothing of the caller's environment (Bundler, RUBYLIB, ~/.cargo) leaks in.
  class UserShell
    PATH = "/usr/bin:/bin"

    def initialize(home)
      @home = home
    end

    # The command's output (stdout and stderr) and whether it succeeded.
    def run(*command, env: {}, chdir: @home)
      settings = { "PATH" => PATH, "HOME" => @home }.merge(env).map { |name, value| "#{name}=#{value}" }
      output, status = Open3.capture2e("env", "-i", *settings, *command, chdir: chdir)
      [output, status.success?]
    end

    # The first of the names found on PATH, nil when none is.
    def find_command(*names)
      names.product(PATH.split(":")).map { |name, dir| File.join(dir, name) }.find { |path| File.executable?(path) }
    end
  end
end
