# frozen_string_literal: true

module Ferrolock
  module Web
    # Helpers for the tab's views (mixed into Sidekiq's WebAction). Every value shown goes
    # through `fl` (escaped, "—" for nothing); every URL through `fl_url` (query-encoded).
    module ViewHelpers
      PAGES = [%w[locks Locks], %w[locks/uniques Uniques], %w[locks/limiters Limiters],
               ["locks/rate_limiters", "Rate limiters"], %w[locks/tenants FairTenant],
               %w[locks/markers Shoryuken]].freeze
      SEARCH_HINTS = { "locks/tenants" => "Job class (exact)", "locks/uniques" => "Job class pattern, or unique:…",
                       "locks/markers" => "Queue pattern" }.freeze

      def fl(value)
        h(Ferrolock::Admin::Table.text(value))
      end

      def fl_holder(holder)
        fl(Ferrolock::Admin::Table.holder(holder))
      end

      def fl_since(holder)
        fl(Ferrolock::Admin::Table.since(holder))
      end

      # The token's random part; the whole token as a tooltip.
      def fl_token(token)
        %(<code title="#{fl(token)}">#{fl(Ferrolock::Admin::Table.token(token))}</code>)
      end

      # An escaped URL of the tab: path under Sidekiq Web's root, with query parameters.
      def fl_url(path, params = {})
        query = ::Rack::Utils.build_query(params.compact.transform_values(&:to_s))
        h("#{root_path}#{path}#{"?#{query}" unless query.empty?}")
      end

      # A link to the confirmation page of a force release (the release itself is a POST there).
      def fl_release_button(kind, name, token, label: "Force release")
        url = fl_url("locks/release", "kind" => kind, "name" => name, "token" => token)
        %(<a class="btn btn-danger btn-xs ferrolock-release" href="#{url}">#{h(label)}</a>)
      end

      # The search box's placeholder on the page at `path`.
      def fl_search_hint(path)
        SEARCH_HINTS.fetch(path, "Name pattern, e.g. report:*")
      end

      # The listing a release of `kind` returns to.
      def fl_page_of(kind)
        Routes.page_of(kind.to_s)
      end

      def fl_pages
        PAGES
      end

      # A request parameter as a String ("" when absent).
      def fl_param(name)
        value = request.params[name]
        value.is_a?(String) ? value : ""
      end
    end
  end
end
