# frozen_string_literal: true

require "json"
require "sidekiq"
require "sidekiq/api"

# Sidekiq::IterableJob (7.3+) under DualLock, until_executed uniqueness and a ConcurrentLimiter: a
# stopping Sidekiq interrupts the iterations, saves their cursors and pushes the jobs back (same
# jid, through the client middlewares); a new Sidekiq resumes each from its cursor. Runs on 7.3.10
# (bin/test rspec_sidekiq7) and 8.1 (bin/test modern); Sidekiq 6.4 has no iterable jobs.
RSpec.describe "Sidekiq iterable jobs interrupted and pushed again", time_limit: 180 do
  let(:app) { "spec/fixtures/iterable_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:classes) { %w[IterUniqueJob IterDualJob IterLimitedJob] }
  let(:admin) { Ferrolock::Admin.new }

  before do
    skip "Sidekiq::IterableJob needs Sidekiq 7.3+ (#{Sidekiq::VERSION} loaded)" if
      Gem::Version.new(Sidekiq::VERSION) < Gem::Version.new("7.3")
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
  end

  # Pushes through the app's client middlewares (uniqueness); returns the jids (nil: not pushed).
  def push(*class_names)
    out = run_ruby!(<<~RUBY)
      require #{File.join(FerrolockTest::ROOT, app).dump}
      puts JSON.generate(#{class_names.inspect}.map { |name| Object.const_get(name).perform_async })
    RUBY
    JSON.parse(out.lines.last)
  end

  def done = redis.lrange("done", 0, -1).map(&:split)

  def done_by(name) = done.select { |klass, _| klass == name }.map { |_, item| Integer(item) }

  it "resumes each job from its cursor, keeping the unique lock and freeing DualLock and the limiter meanwhile" do
    jids = push(*classes)
    expect(jids).to all(be_a(String))

    sidekiq = FerrolockTest::SidekiqProcess.new(app, concurrency: 5, shutdown_timeout: 8).start
    begin
      wait_until(timeout: 60, interval: 0.05, what: "two items of each job") do
        classes.all? { |c| done_by(c).size >= 2 }
      end
    ensure
      sidekiq.stop # TERM: Sidekiq quiets, the iterations stop at their next item and are pushed back
    end
    log = sidekiq.log
    expect(classes.map { |c| done_by(c).size }).to all(be < 8), log

    # Pushed back, same jids, with their cursors saved; nothing failed.
    expect(Sidekiq::Queue.new("default").map(&:jid)).to match_array(jids), log
    expect(jids.map { |jid| redis.exists?("it-#{jid}") }).to all(be(true))
    expect(Sidekiq::RetrySet.new.size + Sidekiq::DeadSet.new.size).to eq(0), log
    # The queued job keeps its unique lock (a duplicate is refused); DualLock and the limiter are free.
    unique = admin.uniques("IterUniqueJob").items
    expect(unique.map(&:jid)).to eq([jids[0]])
    expect(unique.first.ttl).to be > 0
    expect(push("IterUniqueJob")).to eq([nil])
    expect(admin.locks("iter-dual").items.select(&:held?)).to be_empty
    expect(admin.limiters("iter-limit").items.sum(&:in_use)).to eq(0)

    FerrolockTest::SidekiqProcess.new(app, concurrency: 5).start.then do |again|
      wait_until(timeout: 60, interval: 0.05, what: "every item") { done.size >= 24 && !redis.exists?("queue:default") }
      sleep 0.5 # the last jobs' middlewares release after their final item
    ensure
      again&.stop
    end
    # Every item exactly once: the interrupted runs stopped before an item and resumed at it.
    classes.each { |c| expect(done_by(c).sort).to eq((0...8).to_a), "#{c}: #{done_by(c)}" }
    expect(jids.map { |jid| redis.exists?("it-#{jid}") }).to all(be(false))
    expect(admin.uniques("IterUniqueJob").items).to be_empty
    expect(push("IterUniqueJob")).to all(be_a(String))
  end
end
