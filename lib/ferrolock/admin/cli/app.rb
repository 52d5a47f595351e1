# frozen_string_literal: true

module Ferrolock
  class Admin
    class Cli
      # Loads the app's code for `ferrolock --require FILE` (config/environment.rb of a Rails app, or
      # any file that configures ferrolock and defines the app's job classes and limiters).
      #
      # A file inside a Rails app (a directory above it holds config/application.rb) is loaded from
      # that app's root, as `bin/rails runner` does: Rails falls back to the working directory for
      # Rails.root when the app has no config.ru, and apps read config/*.yml, .env and the like from
      # relative paths. So `ferrolock --require /srv/app/config/environment.rb locks` works from any
      # directory. The command stays there afterwards: every path it was given is made absolute first.
      #
      # While the app loads, $stdout is the command's stderr: what the app prints as it boots (a
      # logger made on $stdout included) never mixes into a table or into --json output.
      module App
        module_function

        def load(file, stderr)
          file = File.expand_path(file)
          root = app_root(File.dirname(file))
          Dir.chdir(root) if root
          with_stdout(stderr) { require file }
        end

        # The nearest directory at or above `dir` holding config/application.rb, or nil.
        def app_root(dir)
          loop do
            return dir if File.file?(File.join(dir, "config", "application.rb"))

            parent = File.dirname(dir)
            return nil if parent == dir

            dir = parent
          end
        end

        def with_stdout(stream)
          saved = $stdout
          $stdout = stream
          yield
        ensure
          $stdout = saved
        end
      end
    end
  end
end
