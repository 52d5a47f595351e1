# frozen_string_literal: true

module Ferrolock
  module Web
    # A ConcurrentLimiter's or a limits_concurrency key's limit changed live from the tab, or a Shoryuken
    # queue's lock paused (Admin#set_limit, #pause, #resume, #clear_override): the listing page's form
    # asks for this confirmation page (GET), whose form POSTs the change; Sidekiq Web's CSRF
    # protection refuses a POST without the session's token before it gets here.
    module LimitRoutes
      PATH = "locks/limiters/limit"
      # What the form may ask => [Admin method, the confirmation's question].
      CHANGES = { "set_limit" => [:set_limit, "Set the limit of %s to %s in every process?"],
                  "pause" => [:pause, "Pause %s? No new holder enters until it is resumed; nothing is dropped."],
                  "resume" => [:resume, "Resume %s? Its waiters run."],
                  "clear" => [:clear_override, "Clear the live override of %s (the code's limit, resumed)?"] }.freeze
      # What the form's `kind` may be => the page listing it.
      KINDS = { "concurrent_limiter" => "locks/limiters", "limits_concurrency" => "locks/concurrency",
                "shoryuken_lock" => "locks/markers" }.freeze

      module_function

      def draw(app)
        app.get("/#{PATH}") do
          name, change, limit, kind = LimitRoutes.params(self)
          erb(Web.view(:limit_confirm), locals: { name: name, change: change, limit: limit, kind: kind,
                                                  info: LimitRoutes.info(name, kind) })
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
        app.post("/#{PATH}") do
          name, change, limit, kind = LimitRoutes.params(self)
          LimitRoutes.apply(name, change, limit, kind)
          query = ::Rack::Utils.build_query("q" => Admin::KeySpace.escape(name), "changed" => change)
          redirect("#{root_path}#{KINDS.fetch(kind)}?#{query}")
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
      end

      # [name, change, limit (an Integer for set_limit, else nil), kind] of the request; ArgumentError
      # when unusable.
      def params(action)
        name = Validate.name!(:name, action.fl_param("name"))
        change = action.fl_param("change")
        raise ArgumentError, "change: must be one of #{CHANGES.keys.join(", ")}" unless CHANGES.key?(change)

        kind = action.fl_param("kind")
        kind = "concurrent_limiter" if kind.empty?
        raise ArgumentError, "kind: must be one of #{KINDS.keys.join(", ")}" unless KINDS.key?(kind)
        return [name, change, nil, kind] unless change == "set_limit"

        given = action.fl_param("limit")
        raise ArgumentError, "limit: must be a positive integer, got #{given.inspect}" unless given.match?(/\A\d+\z/)

        [name, change, Validate.positive_integer!(:limit, Integer(given, 10)), kind]
      end

      def apply(name, change, limit, kind)
        method = CHANGES.fetch(change).first
        args = limit ? [name, limit] : [name]
        Web.admin.public_send(method, *args, kind: kind.to_sym)
      end

      def queue?(kind) = kind == "shoryuken_lock"

      def queue_state(queue)
        Web.admin.limit_override(queue, kind: :shoryuken_lock)&.paused ? "paused" : "running"
      end

      def question(name, change, limit)
        format(CHANGES.fetch(change).last, name, limit)
      end

      # The LimiterInfo (or a key's ConcurrencyInfo) of exactly `name` (nil: nothing held, waiting nor
      # overridden there).
      def info(name, kind = "concurrent_limiter")
        return Routes.concurrency_info(name) if kind == "limits_concurrency"
        return nil if queue?(kind)

        Web.admin.limiters(Admin::KeySpace.escape(name)).items.find { |item| item.name == name }
      end

      # "Now: …" on the confirmation page: the limit in force, the holders and the waiting (a queue:
      # queue_state).
      def now(info, name, kind)
        return [Admin::Table.limit(info), info.in_use, info.waiting] if info && kind == "concurrent_limiter"

        over = Web.admin.limit_override(name, kind: kind.to_sym)
        [Admin::Table.overridden(Admin::Table.text(info&.limit), over), info&.holders&.size || 0, info&.blocked || 0]
      end
    end
  end
end
