# frozen_string_literal: true

module Ferrolock
  module Web
    # The tab's routes. Bad input (a pattern with braces, a malformed cursor) answers 400 with
    # the message; the POST is checked by Sidekiq Web's CSRF protection before it gets here.
    module Routes
      PER_PAGE = 25

      module_function

      def draw(app)
        lists(app)
        release(app)
      end

      def lists(app)
        app.get("/locks") do
          Routes.list(self, :locks, "locks") do |admin, q, cursor|
            admin.locks(q, cursor: cursor, per_page: PER_PAGE)
          end
        end
        app.get("/locks/limiters") do
          Routes.list(self, :limiters, "locks/limiters") do |admin, q, cursor|
            admin.limiters(q, cursor: cursor, per_page: PER_PAGE)
          end
        end
        app.get("/locks/markers") do
          Routes.list(self, :markers, "locks/markers") do |admin, q, cursor|
            admin.markers(q, cursor: cursor, per_page: PER_PAGE)
          end
        end
        app.get("/locks/tenants") do
          Routes.list(self, :tenants, "locks/tenants") do |admin, q, cursor|
            admin.tenants(q == "*" ? nil : q, cursor: cursor, per_page: PER_PAGE)
          end
        end
      end

      def release(app)
        confirm(app)
        app.post("/locks/release") do
          name = fl_param("name")
          released = Web.admin.force_release(name, kind: Routes.given(fl_param("kind")),
                                                   token: Routes.given(fl_param("token")))
          redirect("#{root_path}locks?#{::Rack::Utils.build_query("released" => released.size, "name" => name)}")
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
      end

      # The confirmation page: what is held now, and the POST form.
      def confirm(app)
        app.get("/locks/release") do
          name = fl_param("name")
          erb(Web.view(:confirm), locals: { items: Web.admin.show(name), name: name,
                                            kind: fl_param("kind"), token: fl_param("token") })
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
      end

      # A form field, nil when left empty.
      def given(value)
        value.empty? ? nil : value
      end

      # Renders one listing page; `self` of the block is Sidekiq's WebAction.
      def list(action, view, path)
        query = action.fl_param("q")
        page = yield(Web.admin, query.empty? ? "*" : query, action.fl_param("cursor"))
        action.erb(Web.view(view), locals: { page: page, query: query, path: path })
      rescue ArgumentError, TypeError => e
        bad_request(e)
      end

      def bad_request(error)
        throw :halt, [400, { "Content-Type" => "text/plain" }, ["#{error.class}: #{error.message}"]]
      end
    end
  end
end
