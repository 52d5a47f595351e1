# frozen_string_literal: true

# The Sidekiq Web "Locks" tab: `require "ferrolock/web"` where Sidekiq Web is mounted (it requires
# sidekiq/web itself). See Ferrolock::Web (web/tab.rb).
require "sidekiq/web"
require_relative "../ferrolock"
require_relative "admin"
require_relative "web/tab"
require_relative "web/frame_guard"

::Sidekiq::Web.register(Ferrolock::Web)
::Sidekiq::Web.use(Ferrolock::Web::FrameGuard)
::Sidekiq::Web.tabs["Locks"] = "locks"
