# frozen_string_literal: true

require "spec_helper"
require "rack/test"
require_relative "support/sidekiq_web"

FerrolockTest::SidekiqWeb.load!

# A limit changed live from the Web tab while two real Sidekiq processes run limiter-bound jobs
# (spec/fixtures/live_limit_app.rb, limit 2 in the code): the concurrency measured with Redis'
# clock follows within a second; paused, no job starts; resumed, every job runs exactly once.
RSpec.describe "Limits changed live, two Sidekiq processes" do
  include Rack::Test::Methods

  let(:app) { FerrolockTest::SidekiqWeb.app }
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:jobs) { 120 }

  before do
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
  end

  def redis_ms
    seconds, micros = redis.call("TIME")
    (Integer(seconds) * 1000) + (Integer(micros) / 1000)
  end

  # [index, ms, inside] of every start so far.
  def starts
    redis.lrange("live:events", 0, -1).filter_map do |event|
      kind, index, ms, inside = event.split("|")
      [Integer(index), Integer(ms), Integer(inside)] if kind == "start"
    end
  end

  # The tab's form, as an operator sends it: the confirmation page, then its POST (with the page's
  # CSRF token; Sidekiq 8 checks the browser's Sec-Fetch-Site instead). Returns Redis' time (ms)
  # just before the POST.
  def change(change, limit = nil)
    query = { "name" => "live", "change" => change, "limit" => limit }.compact
    get("/locks/limiters/limit", query)
    expect(last_response.status).to eq(200), last_response.body[0, 300]
    token = last_response.body[/name='authenticity_token' value='([^']+)'/, 1]
    at = redis_ms
    if FerrolockTest::SidekiqVersion.at_least?("8")
      post("/locks/limiters/limit", query, "HTTP_SEC_FETCH_SITE" => "same-origin")
    else
      post("/locks/limiters/limit", query.merge("authenticity_token" => token))
    end
    expect(last_response.status).to eq(302), last_response.body[0, 300]
    at
  end

  def push_all
    Sidekiq::Client.push_bulk("class" => "LiveJob", "args" => Array.new(jobs) { |i| [i] }, "queue" => "default")
  end

  it "moves the measured concurrency within a second, blocks while paused, and runs every job once" do
    app_file = "spec/fixtures/live_limit_app.rb"
    with_sidekiq(app_file, concurrency: 5) do
      with_sidekiq(app_file, concurrency: 5) do
        push_all
        wait_until(timeout: 30) { starts.size >= 8 }

        raised = change("set_limit", "5")
        sleep 2
        lowered = change("set_limit", "1")
        sleep 2
        paused = change("pause")
        sleep 3
        paused_until = redis_ms
        resumed = change("resume")
        sleep 1.5
        cleared = change("clear")
        wait_until(timeout: 90, interval: 0.2) { redis.hlen("live:runs") == jobs && redis.get("live:inside") == "0" }

        all = starts
        during = ->(from, to) { all.select { |_, ms, _| ms > from && ms <= to } }
        # Before any change: the code's limit, 2.
        expect(during.call(0, raised).map(&:last).max).to eq(2)
        # Raised to 5: a third job runs within a second of the POST, and never more than 5.
        first_over = during.call(raised, lowered).find { |_, _, inside| inside > 2 }
        expect(first_over).not_to be_nil, "no start above 2 after the raise"
        expect(first_over[1] - raised).to be < 1000
        expect(during.call(raised, lowered).map(&:last).max).to be <= 5
        # Lowered to 1: holders finish their 0.2 s jobs; a start a second later is alone.
        expect(during.call(lowered + 1000, paused).map(&:last)).to all(eq(1))
        # Paused: nothing starts (a start just after the POST was admitted before it).
        expect(during.call(paused + 250, paused_until).size).to eq(0)
        # Resumed: the waiters (woken, or rescheduled ones coming back) start within a second.
        after_resume = during.call(resumed, cleared)
        expect(after_resume).not_to be_empty
        expect(after_resume.first[1] - resumed).to be < 1000
        # Every job ran exactly once: nothing dropped, nothing doubled.
        runs = redis.hgetall("live:runs")
        expect(runs.size).to eq(jobs)
        expect(runs.values.uniq).to eq(["1"])
        expect(all.size).to eq(jobs)
      end
    end
  end
end
