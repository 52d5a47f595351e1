# frozen_string_literal: true

require_relative "view_helpers"
require_relative "routes"
require_relative "limit_routes"
require_relative "history_page"

module Ferrolock
  # The Sidekiq Web "Locks" tab (registered by `require "ferrolock/web"`). Pages: DistMutex/DualLock
  # locks, ConcurrentLimiters, FairTenant counts, Shoryuken markers; search by name, SCAN-cursor
  # pagination, and a force release (a confirmation page, then a POST carrying Sidekiq Web's CSRF
  # token). This file loads no Sidekiq: `Ferrolock::Web.client = …` works before Sidekiq Web is loaded.
  module Web
    VIEWS = File.expand_path("views", __dir__)
    # Sidekiq 8's register serves <ROOT_DIR>/assets/ferrolock/js (the History page's charts).
    ROOT_DIR = __dir__

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
