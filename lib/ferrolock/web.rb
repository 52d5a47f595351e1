# frozen_string_literal: true

# The Sidekiq Web "Locks" tab: `require "ferrolock/web"` where Sidekiq Web is mounted (it requires
# sidekiq/web itself). See Ferrolock::Web (web/tab.rb).
require "sidekiq/web"
require_relative "../ferrolock"
require_relative "admin"
require_relative "web/tab"

::Sidekiq::Web.register(Ferrolock::Web)
::Sidekiq::Web.tabs["Locks"] = "locks"
