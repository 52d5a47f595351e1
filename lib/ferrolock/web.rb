# frozen_string_literal: true

# The Sidekiq Web "Locks" tab: `require "ferrolock/web"` where Sidekiq Web is mounted (it requires
# sidekiq/web itself). See Ferrolock::Web (web/tab.rb).
require "sidekiq/web"
require_relative "../ferrolock"
require_relative "admin"
require_relative "web/tab"
require_relative "web/frame_guard"

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
