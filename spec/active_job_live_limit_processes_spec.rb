# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"
require_relative "fixtures/concurrency_app"

# A limits_concurrency key's limit changed live (Admin, as the Web tab and `ferrolock limit --concurrency`
# call it) while two real Sidekiq processes work its jobs (spec/fixtures/concurrency_app.rb's LcLiveJob: to: 2
# in the code, 0.3 s each, counted in Redis). This process enqueues and changes the limit.
RSpec.describe "ActiveJob limits_concurrency changed live in Sidekiq processes", time_limit: 120 do
  let(:app) { "spec/fixtures/concurrency_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }

  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  around do |example|
    Sidekiq.configure_client { |c| c.redis = { url: FerrolockTest.redis_server.url } }
    previous = Ferrolock.config.logger
    Ferrolock.config.logger = Logger.new(nil)
    example.run
  ensure
    Ferrolock.config.logger = previous
  end

  def sidekiq = FerrolockTest::SidekiqProcess.new(app, queues: %w[default], concurrency: 5)

  def done(key) = redis.lrange("lc:done", 0, -1).map(&:split).select { |k, _| k == key }.map { |_, num| Integer(num) }

  def started(key) = redis.lrange("lc:started", 0, -1).count { |line| line.start_with?("#{key} ") }

  it "pause blocks every job of the key, resume runs each once; a raised and a lowered limit move the concurrency" do
    processes = [sidekiq, sidekiq]
    processes.map { |process| Thread.new { process.start(boot_timeout: 40) } }.each(&:join)
    key = "LcLiveJob/up"
    admin.pause(key, kind: :limits_concurrency)
    12.times { |num| LcLiveJob.perform_later("up", num) }
    expect(redis.llen("ferrolock:{concurrency:#{key}}:blocked")).to eq(12)
    sleep 1.5 # the timers visit the key meanwhile (every 0.2 s here): paused, they promote nobody
    expect(started("up")).to eq(0)

    admin.set_limit(key, 4, kind: :limits_concurrency) # still paused
    sleep 0.5
    expect(started("up")).to eq(0)
    resumed = Ferrolock.monotonic
    admin.resume(key, kind: :limits_concurrency)
    wait_until(timeout: 20, interval: 0.02, what: "the first job of the resumed key started") { started("up") >= 1 }
    first_start = Ferrolock.monotonic - resumed
    wait_until(timeout: 40, interval: 0.05, what: "12 jobs done") { done("up").size >= 12 }
    expect(done("up")).to match_array(0...12) # each once
    expect(Integer(redis.get("lc:max:up"))).to eq(4) # the live limit, not the code's 2

    admin.set_limit("LcLiveJob/down", 1, kind: :limits_concurrency)
    8.times { |num| LcLiveJob.perform_later("down", num) }
    wait_until(timeout: 40, interval: 0.05, what: "8 jobs done") { done("down").size >= 8 }
    expect(done("down")).to match_array(0...8)
    expect(Integer(redis.get("lc:max:down"))).to eq(1)
    RSpec.configuration.reporter.message("  (resume to the first start: #{first_start.round(2)} s)")
  ensure
    processes&.each(&:stop)
  end
end
