# frozen_string_literal: true

require "json"

module Ferrolock
  module Web
    # The History page (locks/history): a kind's busiest names over the last hour, 8 hours or 72
    # hours, or one name's events, waits and holds (?name=). Tables on every Sidekiq; on Sidekiq 8 also
    # charts drawn by its own Chart.js and web/assets/ferrolock/js/history.js, the data in a data-
    # attribute (no inline script: Sidekiq 8's CSP allows only its nonce's scripts).
    module HistoryPage
      KINDS = %w[dist_mutex dual_lock concurrent_limiter rate_limiter limits_concurrency unique shoryuken_lock
                 fair_tenant].freeze
      PERIODS = [["1h", "last hour"], ["8h", "8 hours"], ["72h", "72 hours"]].freeze
      # The time chart's series: [label, Admin#stats histogram, percentile].
      TIME_SERIES = [["wait p50", :waits, :p50], ["wait p99", :waits, :p99], ["hold p50", :holds, :p50],
                     ["hold p99", :holds, :p99]].freeze

      module_function

      def draw(app)
        app.get("/locks/history") do
          HistoryPage.render(self)
        rescue ArgumentError, TypeError => e
          Routes.bad_request(e)
        end
      end

      # `action` is Sidekiq's WebAction.
      def render(action)
        since = action.fl_param("since")
        since = PERIODS.first.first if since.empty?
        name = action.fl_param("name")
        name = action.fl_param("q") if name.empty? # the tab's search box
        kind = action.fl_param("kind")
        kind = KINDS.first if kind.empty?
        stats = name.empty? ? Web.admin.kind_stats(kind, since: since) : Web.admin.stats(name, since: since)
        action.erb(Web.view(:history), locals: { history: stats, kind: kind, name: name, since: since,
                                                 charts: charts?, query: "", path: "locks/history" })
      end

      # Sidekiq 8 serves Chart.js (and the tab's script, see Ferrolock::Web::ROOT_DIR).
      def charts?
        ::Sidekiq::Web.const_defined?(:Config, false) # the page is drawn by Sidekiq::Web: it is loaded
      end

      # The charts' data: one chart per entry, { title:, labels: [bucket start, …], series: { label => [n, …] } }.
      def chart_data(stats, name)
        return kind_charts(stats) if name.empty?

        stats[:primitives].flat_map do |primitive, its|
          [chart("#{primitive}: events", its[:series], ->(bucket) { bucket[:counts] }),
           chart("#{primitive}: waits and holds (ms)", its[:series], ->(bucket) { times_ms(bucket) })]
        end
      end

      # { "wait p50" => ms, "wait p99" =>, "hold p50" =>, "hold p99" => } of one bucket (0 without samples).
      def times_ms(bucket)
        TIME_SERIES.to_h do |label, histogram, p|
          seconds = bucket[histogram][p]
          [label, seconds ? (seconds * 1000).round : 0]
        end
      end

      def kind_charts(stats)
        [chart("#{stats[:kind]}: events, all names", stats[:series], ->(bucket) { bucket[:counts] })]
      end

      def chart(title, buckets, values)
        rows = buckets.map(&values)
        labels = rows.flat_map(&:keys).uniq.sort
        { title: title, labels: buckets.map { |bucket| bucket[:at] },
          series: labels.to_h { |label| [label, rows.map { |row| row.fetch(label, 0) }] } }
      end

      def json(data)
        JSON.generate(data)
      end
    end
  end
end
