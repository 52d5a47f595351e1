# frozen_string_literal: true

require "spec_helper"
require "rack/test"
require "json"
require_relative "support/sidekiq_web"

FerrolockTest::SidekiqWeb.load!

# The Locks tab's History page through Rack: tables on Sidekiq 6.4 and 7.3, and on 8.1 also the
# charts' data and scripts (drawn in Chromium by spec/web_history_browser_spec.rb).
RSpec.describe "Sidekiq Web History page", time_limit: 60 do
  include Rack::Test::Methods

  let(:app) { FerrolockTest::SidekiqWeb.app }
  let(:hostile) { "<script>alert(1)</script>&x" }

  before do
    Ferrolock.configure { |c| c.history = true }
    4.times { Ferrolock::DistMutex.new("web:busy").synchronize { nil } }
    Ferrolock::DistMutex.new("web:quiet").synchronize { nil }
    Ferrolock::DistMutex.new(hostile).synchronize { nil }
    Ferrolock::History.flush!
  ensure
    Ferrolock.configure { |c| c.history = false }
  end

  def page(path)
    get(path)
    expect(last_response.status).to eq(200), "#{path}: #{last_response.status} #{last_response.body[0, 300]}"
    expect(last_response.body).not_to include("<script>alert")
    last_response.body
  end

  def charts_of(body)
    json = body[/data-charts="([^"]*)"/, 1]
    json && JSON.parse(CGI.unescapeHTML(json))
  end

  it "lists a kind's busiest names, busiest first, each linking to its own history" do
    body = page("/locks/history?kind=dist_mutex&since=1h")
    links = body.scan(/<a href="[^"]*history\?name=([^"]+?)&amp;since=1h"><code>/).flatten
    names = links.map { |query| CGI.unescape(query) }
    expect(names.first).to eq("web:busy")
    expect(names).to contain_exactly("web:busy", "web:quiet", hostile)
    expect(body).to include("acquired 4, released 4", "&lt;script&gt;alert(1)")
  end

  it "shows one name's events, waits and holds, also from the search box" do
    expect(page("/locks/history?q=web:quiet")).to include("acquired 1")
    body = page("/locks/history?name=web:busy&since=8h")
    expect(body).to include("dist_mutex", "acquired 4", "<th>Holds</th>")
    # Waits, then holds: each a count and p50, p95, p99.
    expect(body).to match(%r{<td>4</td>(\s*<td>\d+ ms</td>){3}\s*<td>4</td>(\s*<td>\d+ ms</td>){3}})
  end

  it "answers 400 for a bad period" do
    get("/locks/history?since=5w")
    expect(last_response.status).to eq(400)
    expect(last_response.body).to include("since:")
  end

  it "puts the charts' data and Sidekiq's own Chart.js on the page on Sidekiq 8, tables only before" do
    body = page("/locks/history?name=web:busy")
    charts = charts_of(body)
    unless FerrolockTest::SidekiqVersion.at_least?("8")
      expect(charts).to be_nil
      expect(body).not_to include("chart.min.js")
      next
    end
    # Both with Sidekiq's CSP nonce; no inline script of the tab's.
    %w[javascripts/chart.min.js ferrolock/js/history.js].each do |src|
      tag = body[/<script [^>]*src="[^"]*#{Regexp.escape(src)}"[^>]*>/]
      expect(tag).to match(/nonce="\w+"/)
    end
    expect(charts.map { |c| c["title"] }).to eq(["dist_mutex: events", "dist_mutex: waits and holds (ms)"])
    expect(charts.first["series"]["acquired"].sum).to eq(4)
    expect(charts.last["series"].keys).to contain_exactly("wait p50", "wait p99", "hold p50", "hold p99")
    get("/ferrolock/js/history.js")
    expect(last_response.status).to eq(200)
    expect(last_response.body).to include("new window.Chart(")
  end
end
