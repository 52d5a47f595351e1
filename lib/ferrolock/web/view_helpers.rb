# frozen_string_literal: true

module Ferrolock
  module Web
    # Helpers for the tab's views (mixed into Sidekiq's WebAction). Every value shown goes
    # through `fl` (escaped, "—" for nothing); every URL through `fl_url` (query-encoded).
    module ViewHelpers
      PAGES = [%w[locks Locks], %w[locks/uniques Uniques], %w[locks/limiters Limiters],
               ["locks/rate_limiters", "Rate limiters"], %w[locks/tenants FairTenant],
               %w[locks/markers Shoryuken], ["locks/concurrency", "limits_concurrency"],
               %w[locks/history History]].freeze
      SEARCH_HINTS = { "locks/tenants" => "Job class (exact)", "locks/uniques" => "Job class pattern, or unique:…",
                       "locks/markers" => "Queue pattern", "locks/history" => "Name (exact)",
                       "locks/concurrency" => "Key pattern, e.g. DeliverJob/*" }.freeze

      def fl(value)
        h(Ferrolock::Admin::Table.text(value))
      end

      def fl_holder(holder)
        fl(Ferrolock::Admin::Table.holder(holder))
      end

      def fl_since(holder)
        fl(Ferrolock::Admin::Table.since(holder))
      end

      # Characters of a token's random part shown in tables (enough to tell holders apart).
      TOKEN_SHOWN = 12

      # The start of the token's random part; the whole token as a tooltip.
      def fl_token(token)
        part = Ferrolock::Admin::Table.token(token)
        part = "#{part[0, TOKEN_SHOWN]}…" if part && part.length > TOKEN_SHOWN + 1
        %(<code title="#{fl(token)}">#{fl(part)}</code>)
      end

      # Who holds, as the listings name them ("host pid=… tid=… JobClass jid=…"), with the token's
      # random part after it (whole token as a tooltip); the token alone when it has no holder metadata.
      def fl_held(holder, token)
        return fl_token(token) if holder.nil?

        %(#{fl_holder(holder)} (token #{fl_token(token)}))
      end

      # The holder (as fl_held) of `token` among a confirmation page's items, else the token.
      def fl_held_by_token(items, token)
        holds = items.flat_map do |item|
          item.kind == :dual_lock ? [item.exec, item.wait].compact : [item]
        end
        held = holds.find { |hold| hold.respond_to?(:token) && hold.token == token }
        fl_held(held&.holder, token)
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

      # The limiters (or concurrency) page's form changing a limit live: each button asks its
      # confirmation page (GET; the change itself is that page's POST, Web::LimitRoutes). `item`: a
      # `override`: the LimitOverride::Override in force (nil: none).
      def fl_limit_form(name, override, kind = "concurrent_limiter")
        paused = override&.paused
        buttons = [%(<input type="number" name="limit" min="1" class="form-control input-sm" aria-label="New limit">),
                   %(<button name="change" value="set_limit" class="btn btn-warning btn-xs">Set limit</button>),
                   %(<button name="change" value="#{paused ? "resume" : "pause"}" class="btn btn-warning btn-xs">) +
                     %(#{paused ? "Resume" : "Pause"}</button>)]
        clear = %(<button name="change" value="clear" class="btn btn-default btn-xs">Clear</button>)
        buttons << clear if override
        %(<form method="get" action="#{fl_url(LimitRoutes::PATH)}" class="form-inline ferrolock-limit-change">) +
          %(<input type="hidden" name="name" value="#{h(name)}"><input type="hidden" name="kind" ) +
          %(value="#{h(kind)}">#{buttons.join}</form>)
      end

      # A link to the confirmation page of a limits_concurrency job's force release (a holder's or a
      # blocked job's; the release itself is a POST there).
      def fl_release_job_button(key, job_id)
        url = fl_url("locks/concurrency/release", "key" => key, "job_id" => job_id)
        %(<a class="btn btn-danger btn-xs ferrolock-release" href="#{url}">Force release</a>)
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
