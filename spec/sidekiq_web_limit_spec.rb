# frozen_string_literal: true

require "spec_helper"
require "rack/test"
require_relative "support/sidekiq_web"

FerrolockTest::SidekiqWeb.load!

# The Locks tab's live limit change (Web::LimitRoutes): a form on the limiters page, a confirmation
# page, and its POST, which Sidekiq Web's CSRF protection guards (a token on 6.4 and 7, the
# browser's Sec-Fetch-Site on 8).
RSpec.describe "Sidekiq Web: limits changed live" do
  include Rack::Test::Methods

  let(:app) { FerrolockTest::SidekiqWeb.app }
  let(:admin) { Ferrolock::Admin.new }
  let(:limiter) { Ferrolock::ConcurrentLimiter.new("web:live", 3) }

  def fetch_metadata? = FerrolockTest::SidekiqVersion.at_least?("8")

  def confirm(query)
    get("/locks/limiters/limit", query)
    expect(last_response.status).to eq(200), last_response.body[0, 300]
    last_response.body
  end

  def form_post(form, body)
    return post("/locks/limiters/limit", form, "HTTP_SEC_FETCH_SITE" => "same-origin") if fetch_metadata?

    token = body[/name='authenticity_token' value='([^']+)'/, 1]
    expect(token).not_to be_nil
    post("/locks/limiters/limit", form.merge("authenticity_token" => token))
  end

  it "shows the form where the limit is shown, confirms, refuses a forged POST and applies the real one" do
    limiter.within_limit do
      get("/locks/limiters")
      expect(last_response.body).to include("ferrolock-limit-change").and include('value="set_limit"')
      form = { "name" => "web:live", "change" => "set_limit", "limit" => "1" }
      body = confirm(form)
      expect(body).to include("Set the limit of web:live to 1 in every process?")

      # No token (6.4/7), or a cross-site request (8): refused, nothing changed.
      post("/locks/limiters/limit", form, fetch_metadata? ? { "HTTP_SEC_FETCH_SITE" => "cross-site" } : {})
      expect(last_response.status).to eq(403)
      expect(Ferrolock::Admin::LimitOverride.read(admin.client, "web:live")).to be_nil

      form_post(form, body)
      expect(last_response.status).to eq(302)
      get("/locks/limiters?q=web:live")
      expect(last_response.body).to include("1 (set live; code: 3)").and include('value="pause"')

      pause = { "name" => "web:live", "change" => "pause" }
      form_post(pause, confirm(pause))
      get("/locks/limiters?q=web:live")
      expect(last_response.body).to include("paused (1 (set live; code: 3))").and include('value="resume"')
    end
    expect { limiter.within_limit(wait_timeout: 0) { nil } }.to raise_error(Ferrolock::OverLimit)
    clear = { "name" => "web:live", "change" => "clear" }
    form_post(clear, confirm(clear))
    expect(limiter.within_limit(wait_timeout: 0) { :in }).to eq(:in)
  end

  it "changes a limits_concurrency key's limit from its page: paused, its jobs are blocked; resumed, promoted" do
    redis = FerrolockTest.redis_server.redis
    native = Ferrolock::Native::JobConcurrency.new(Ferrolock.client.native)
    policy = [1, 30.0, "block", 0]
    native.admit("WebJob/k", "j1", "{}", false, policy, 0) # holds the one slot: the key is listed
    get("/locks/concurrency")
    expect(last_response.body).to include("ferrolock-limit-change")
      .and include('name="kind" value="limits_concurrency"')

    pause = { "name" => "WebJob/k", "change" => "pause", "kind" => "limits_concurrency" }
    body = confirm(pause)
    # (Sidekiq 6.4's escaping writes "/" as "&#x2F;", 8's leaves it.)
    expect(body).to match(%r{Pause WebJob(/|&#x2F;)k\?}).and include("1 in use, 0 blocked")
    form_post(pause, body)
    expect(last_response.status).to eq(302)
    expect(last_response.location).to include("locks/concurrency?")
    native.give_back("WebJob/k", "j1", 1, 0)
    expect(native.admit("WebJob/k", "j2", "{}", false, policy, 0).first).to eq(:blocked) # the slot is free, yet paused
    get("/locks/concurrency?q=WebJob/k")
    expect(last_response.body).to include("paused (1)").and include('value="resume"')

    due = "ferrolock:{concurrency}:due"
    redis.zadd(due, 9_000_000_000_000, "WebJob/k") # as a timer's claim leaves it while nothing can move
    resume = { "name" => "WebJob/k", "change" => "resume", "kind" => "limits_concurrency" }
    form_post(resume, confirm(resume))
    # The key is due at once in the timers' index (no timer runs here: the index says who must visit).
    expect(redis.zscore(due, "WebJob/k")).to eq(1.0)
    expect(native.reap("WebJob/k", 0).map(&:first)).to eq(["j2"])
    native.give_back("WebJob/k", "j2", 1, 0)
  end

  it "pauses a Shoryuken queue's lock from the Shoryuken page, lists it there, and resumes it" do
    get("/locks/markers")
    expect(last_response.body).to include("Pause queue").and include('name="kind" value="shoryuken_lock"')
    pause = { "name" => "web-orders", "change" => "pause", "kind" => "shoryuken_lock" }
    body = confirm(pause)
    expect(body).to include("Pause web-orders?").and include("Now: running.")
    post("/locks/limiters/limit", pause, fetch_metadata? ? { "HTTP_SEC_FETCH_SITE" => "cross-site" } : {})
    expect(last_response.status).to eq(403) # no CSRF token (6.4/7), or cross-site (8): refused
    expect(admin.paused_queues.items).to eq([])

    form_post(pause, body)
    expect(last_response.status).to eq(302)
    expect(last_response.location).to include("locks/markers?")
    expect(admin.limit_override("web-orders", kind: :shoryuken_lock).paused).to be(true)
    get("/locks/markers")
    expect(last_response.body).to include("<code>web-orders</code>: its lock is paused").and include('value="resume"')

    resume = pause.merge("change" => "resume")
    expect(confirm(resume)).to include("Now: paused.")
    form_post(resume, confirm(resume))
    expect(admin.paused_queues.items).to eq([])
    get("/locks/limiters/limit", pause.merge("change" => "set_limit", "limit" => "2"))
    form_post(pause.merge("change" => "set_limit", "limit" => "2"), last_response.body)
    expect(last_response.status).to eq(400) # a queue has no limit
  end

  it "answers 400 to a bad change or limit" do
    get("/locks/limiters/limit", "name" => "web:live", "change" => "drop")
    expect(last_response.status).to eq(400)
    get("/locks/limiters/limit", "name" => "web:live", "change" => "set_limit", "limit" => "0")
    expect(last_response.status).to eq(400)
    expect(last_response.body).to include("limit")
    get("/locks/limiters/limit", "name" => "web:live", "change" => "pause", "kind" => "rate_limiter")
    expect(last_response.status).to eq(400)
  end
end
