# frozen_string_literal: true

module Ferrolock
  module Web
    # Rack middleware (added with Sidekiq::Web.use) that forbids framing the tab's pages:
    # another site could otherwise show the force-release confirmation in a hidden frame and
    # trick an operator into clicking it (clickjacking). Sidekiq's own pages are left as they are.
    class FrameGuard
      PATH = "/locks"

      def initialize(app)
        @app = app
      end

      def call(env)
        status, headers, body = @app.call(env)
        return [status, headers, body] unless tab?(env["PATH_INFO"])

        headers = headers.dup
        # Lowercase: Rack 3 requires it, Rack 2 compares header names without case.
        headers["x-frame-options"] = "DENY"
        [status, headers, body]
      end

      private

      def tab?(path)
        path = path.to_s
        path == PATH || path.start_with?("#{PATH}/")
      end
    end
  end
end
