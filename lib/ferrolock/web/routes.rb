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
        release_job(app)
        LimitRoutes.draw(app)
        HistoryPage.draw(app)
      end

      # Listing pages: path under the tab => [view, the Admin method listing it].
      LISTS = { "locks" => %i[locks locks], "locks/uniques" => %i[uniques uniques],
                "locks/limiters" => %i[limiters limiters], "locks/rate_limiters" => %i[rate_limiters rate_limiters],
                "locks/markers" => %i[markers markers], "locks/concurrency" => %i[concurrency concurrency] }.freeze

      def lists(app)
        LISTS.each do |path, (view, method)|
          app.get("/#{path}") do
            Routes.list(self, view, path) do |admin, q, cursor|
              admin.public_send(method, q, cursor: cursor, per_page: PER_PAGE)
            end
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
          back = Routes.page_of(fl_param("kind"))
          redirect("#{root_path}#{back}?#{::Rack::Utils.build_query("released" => released.size, "name" => name)}")
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

      # A limits_concurrency job's force release (Admin#force_release_job): its confirmation page,
      # then the POST, which frees the job's slot (the next blocked job is enqueued) or takes it out
      # of the line, and goes back to the key's listing.
      def release_job(app)
        app.get("/locks/concurrency/release") do
          key = fl_param("key")
          erb(Web.view(:concurrency_confirm), locals: { key: key, job_id: fl_param("job_id"),
                                                        info: Routes.concurrency_info(key) })
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
        app.post("/locks/concurrency/release") do
          key = fl_param("key")
          job_id = fl_param("job_id")
          freed = Web.admin.force_release_job(key, job_id)
          query = ::Rack::Utils.build_query("q" => Admin::KeySpace.escape(key), "key" => key, "job_id" => job_id,
                                            "freed" => freed)
          redirect("#{root_path}locks/concurrency?#{query}")
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
      end

      # The ConcurrencyInfo of exactly `key` (nil: nothing held nor blocked there).
      def concurrency_info(key)
        key = Validate.name!(:key, key)
        Web.admin.concurrency(Admin::KeySpace.escape(key)).items.find { |info| info.key == key }
      end

      # The listing a release of `kind` comes from (and returns to).
      def page_of(kind)
        { "unique_lock" => "locks/uniques", "concurrent_limiter" => "locks/limiters" }.fetch(kind, "locks")
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
        throw :halt, [400, { "content-type" => "text/plain" }, ["#{error.class}: #{error.message}"]]
      end
    end
  end
end
