# frozen_string_literal: true

require "fileutils"
require "securerandom"
require "tmpdir"
require_relative "sidekiq_version"

module FerrolockTest
  # Loads Sidekiq::Web and ferrolock's tab, and builds the Rack app an application mounts
  # (Sidekiq Web needs the app's session for its CSRF token).
  #
  # Debian's sidekiq 6.4.1 ships its views (not its JavaScript, which the tab does not need).
  # The vendored 7.3.10 has lib/ only, and its web.rb reads web/views/layout.erb at load: on 7.3
  # Sidekiq Web is loaded through a directory whose lib/ links to the vendored lib and whose
  # web/views/layout.erb is a minimal stand-in (spec/fixtures/sidekiq7_layout.erb), so the real
  # 7.3 router, actions, helpers and CSRF protection serve the tab inside a plain layout.
  module SidekiqWeb
    LAYOUT = File.expand_path("../fixtures/sidekiq7_layout.erb", __dir__)

    module_function

    def load!
      return if @loaded

      require "sidekiq"
      require "rack"
      require_session
      load_sidekiq7_web if SidekiqVersion.seven?
      require "ferrolock/web"
      @loaded = true
    end

    # Rack 3 (Sidekiq 8) moved Rack::Session to the rack-session gem; Rack 2 has it.
    def require_session
      require "rack/session"
    rescue LoadError
      require "rack/session/cookie"
    end

    # Sidekiq Web at `mount` ("" = the root), as an app mounts it.
    def app(mount: "")
      load!
      secret = SecureRandom.hex(32)
      Rack::Builder.new do
        use Rack::Session::Cookie, secret: secret, same_site: true
        mount.empty? ? run(Sidekiq::Web) : map(mount) { run Sidekiq::Web }
      end
    end

    def load_sidekiq7_web
      root = Dir.mktmpdir("ferrolock-sidekiq7-web-")
      at_exit { FileUtils.rm_rf(root) }
      File.symlink(File.join(SidekiqVersion::SIDEKIQ7, "lib"), File.join(root, "lib"))
      FileUtils.mkdir_p(File.join(root, "web", "views"))
      FileUtils.cp(LAYOUT, File.join(root, "web", "views", "layout.erb"))
      # Loaded by this path, Sidekiq::Web::ROOT is root/web; `require "sidekiq/web"` later finds
      # the same real file and loads nothing again.
      require File.join(root, "lib", "sidekiq", "web")
    end
  end
end
