# frozen_string_literal: true

module Ferrolock
  module Web
    # A ConcurrentLimiter's limit changed live from the tab (Admin#set_limit, #pause, #resume,
    # #clear_override): the limiters page's form asks for this confirmation page (GET), whose form
    # POSTs the change; Sidekiq Web's CSRF protection refuses a POST without the session's token
    # before it gets here.
    module LimitRoutes
      PATH = "locks/limiters/limit"
      # What the form may ask => [Admin method, the confirmation's question].
      CHANGES = { "set_limit" => [:set_limit, "Set the limit of %s to %s in every process?"],
                  "pause" => [:pause, "Pause %s? No new holder enters until it is resumed; nothing is dropped."],
                  "resume" => [:resume, "Resume %s? Its waiters run."],
                  "clear" => [:clear_override, "Clear the live override of %s (the code's limit, resumed)?"] }.freeze

      module_function

      def draw(app)
        app.get("/#{PATH}") do
          name, change, limit = LimitRoutes.params(self)
          erb(Web.view(:limit_confirm), locals: { name: name, change: change, limit: limit,
                                                  info: LimitRoutes.info(name) })
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
        app.post("/#{PATH}") do
          name, change, limit = LimitRoutes.params(self)
          LimitRoutes.apply(name, change, limit)
          query = ::Rack::Utils.build_query("q" => Admin::KeySpace.escape(name), "changed" => change)
          redirect("#{root_path}locks/limiters?#{query}")
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
      end

      # [name, change, limit (an Integer for set_limit, else nil)] of the request; ArgumentError when unusable.
      def params(action)
        name = Validate.name!(:name, action.fl_param("name"))
        change = action.fl_param("change")
        raise ArgumentError, "change: must be one of #{CHANGES.keys.join(", ")}" unless CHANGES.key?(change)
        return [name, change, nil] unless change == "set_limit"

        given = action.fl_param("limit")
        raise ArgumentError, "limit: must be a positive integer, got #{given.inspect}" unless given.match?(/\A\d+\z/)

        [name, change, Validate.positive_integer!(:limit, Integer(given, 10))]
      end

      def apply(name, change, limit)
        method = CHANGES.fetch(change).first
        limit ? Web.admin.public_send(method, name, limit) : Web.admin.public_send(method, name)
      end

      def question(name, change, limit)
        format(CHANGES.fetch(change).last, name, limit)
      end

      # The LimiterInfo of exactly `name` (nil: nothing held, waiting nor overridden there).
      def info(name)
        Web.admin.limiters(Admin::KeySpace.escape(name)).items.find { |item| item.name == name }
      end
    end
  end
end
