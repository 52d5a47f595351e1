# frozen_string_literal: true

# The Sidekiq Web "Locks" tab: `require "ferrolock/web"` where Sidekiq Web is mounted (it requires
# sidekiq/web itself and registers the tab); Ferrolock::Web used first (its client set in an
# initializer, say) does the same through ferrolock.rb's autoload.
require "sidekiq/web"
require_relative "../ferrolock"
require_relative "admin"
require_relative "web/view_helpers"
require_relative "web/routes"
require_relative "web/limit_routes"
require_relative "web/history_page"
require_relative "web/frame_guard"

module Ferrolock
  # The Sidekiq Web "Locks" tab. Pages: DistMutex/DualLock locks, ConcurrentLimiters, FairTenant
  # counts, Shoryuken markers; search by name, SCAN-cursor pagination, and a force release (a
  # confirmation page, then a POST carrying Sidekiq Web's CSRF token).
  module Web
    # Sidekiq 8's register serves <ROOT_DIR>/assets/ferrolock/js (the History page's charts).
    ROOT_DIR = File.expand_path("web", __dir__)
    VIEWS = File.join(ROOT_DIR, "views")

    class << self
      # The client the tab reads (nil: Ferrolock.client).
      attr_writer :client

      def admin
        Admin.new(client: @client)
      end

      # A view's ERB source (read each time: Sidekiq compiles String templates per render).
      def view(name)
        File.read(File.join(VIEWS, "#{name}.erb"))
      end

      # Called by Sidekiq::Web.register.
      def registered(app)
        app.helpers(ViewHelpers)
        Routes.draw(app)
      end
    end
  end
end

if defined?(::Sidekiq::Web::Config)
  # Sidekiq 8: extensions register through the Web configuration, naming their tab and its page.
  ::Sidekiq::Web.configure do |config|
    config.register(Ferrolock::Web, name: "ferrolock", tab: "Locks", index: "locks",
                                    root_dir: Ferrolock::Web::ROOT_DIR, asset_paths: ["js"])
  end
else
  # Sidekiq 6.4 and 7.x: register takes the extension alone; the tab is added by hand.
  ::Sidekiq::Web.register(Ferrolock::Web)
  ::Sidekiq::Web.tabs["Locks"] = "locks"
end
# The tab's pages may not be framed (Sidekiq 6.4 to 8 take a Rack middleware this way).
::Sidekiq::Web.use(Ferrolock::Web::FrameGuard)
