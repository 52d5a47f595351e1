# frozen_string_literal: true

require "active_support/notifications"
require_relative "support/active_job_jobs"

# Every ferrolock event also goes to ActiveSupport::Notifications as "<event>.ferrolock"
# (Ferrolock::Notifications), so ActiveSupport::Notifications.subscribe(/ferrolock/) and APM agents
# see them. The cost when nobody listens is measured by `bin/bench notifications`.
RSpec.describe Ferrolock::Notifications, time_limit: 30 do
  include FerrolockTest::ActiveJobJobs

  let(:seen) { [] }
  let!(:listener) do
    ActiveSupport::Notifications.subscribe(/\.ferrolock\z/) { |name, *, payload| seen << [name, payload] }
  end

  after { ActiveSupport::Notifications.unsubscribe(listener) }

  it "publishes every kind in Ferrolock::EVENTS as <event>.ferrolock with its payload" do
    Ferrolock::EVENTS.each { |event| Ferrolock.instrument(event, primitive: :test, name: "n-#{event}") }
    expect(seen.map(&:first)).to eq(Ferrolock::EVENTS.map { |event| "#{event}.ferrolock" })
    expect(seen.map { |_, payload| payload[:name] }).to eq(Ferrolock::EVENTS.map { |event| "n-#{event}" })
  end

  it "publishes a kind that EVENTS does not list yet, by the same rule" do
    Ferrolock.instrument(:some_new_kind, name: "x")
    expect(seen).to eq([["some_new_kind.ferrolock", { name: "x" }]])
  end

  it "publishes the canonical payload (:name beside the older :key)" do
    Ferrolock.instrument(:skipped, primitive: :dual_lock, key: "sync", reason: :already_waiting)
    expect(seen).to eq([["skipped.ferrolock", { primitive: :dual_lock, key: "sync", name: "sync",
                                                reason: :already_waiting }]])
  end

  it "receives what the primitives emit against Redis" do
    Ferrolock::DistMutex.new("notifications:mutex").synchronize { nil }
    Ferrolock::DualLock.new("notifications:dual").run { nil }
    limiter = Ferrolock::ConcurrentLimiter.new("notifications:limit", 1, wait_timeout: 0)
    limiter.within_limit { limiter.within_limit { nil } rescue Ferrolock::OverLimit } # rubocop:disable Style/RescueModifier
    expect(seen.map { |name, payload| [name, *payload.values_at(:primitive, :name)] })
      .to eq([["acquired.ferrolock", :dist_mutex, "notifications:mutex"],
              ["released.ferrolock", :dist_mutex, "notifications:mutex"],
              ["acquired.ferrolock", :dual_lock, "notifications:dual"],
              ["released.ferrolock", :dual_lock, "notifications:dual"],
              ["acquired.ferrolock", :concurrent_limiter, "notifications:limit"],
              ["over_limit.ferrolock", :concurrent_limiter, "notifications:limit"],
              ["released.ferrolock", :concurrent_limiter, "notifications:limit"]])
    # :waited on each acquisition and :held on each release, in seconds.
    expect(seen.select { |name, _| name == "released.ferrolock" }.map { |_, payload| payload[:held] })
      .to all(be_a(Float).and(be >= 0))
  end

  it "receives limits_concurrency's blocked, promoted, released and discarded" do
    ActiveJob::Base.logger = Logger.new(nil)
    klass = recording("NotifiedJob", to: 1, key: ->(account, _n) { account })
    2.times { |n| klass.perform_later("a", n) }
    work_off(klass)
    discarding = recording("NotifiedDiscardJob", to: 1, key: ->(account, _n) { account }, on_conflict: :discard)
    2.times { |n| discarding.perform_later("b", n) }
    work_off(discarding)
    ran
    names = seen.map(&:first).uniq
    expect(names).to include("blocked.ferrolock", "promoted.ferrolock", "released.ferrolock", "discarded.ferrolock")
    expect(seen.find { |name, _| name == "blocked.ferrolock" }.last)
      .to include(primitive: :limits_concurrency, name: "NotifiedJob/a", job_class: "NotifiedJob")
  ensure
    Ferrolock::ActiveJob::Slots.reset!
  end

  it "does not publish a name nobody listens to" do
    ActiveSupport::Notifications.unsubscribe(listener)
    only = []
    sub = ActiveSupport::Notifications.subscribe("over_limit.ferrolock") { |name, *| only << name }
    expect(Ferrolock.listening?(:acquired)).to be(false)
    expect(Ferrolock.listening?(:over_limit)).to be(true)
    Ferrolock.instrument(:acquired, name: "x")
    Ferrolock.instrument(:over_limit, name: "x")
    expect(only).to eq(["over_limit.ferrolock"])
  ensure
    ActiveSupport::Notifications.unsubscribe(sub)
  end

  it "logs a failing listener and never raises into the caller" do
    log = StringIO.new
    Ferrolock.configure { |c| c.logger = Logger.new(log) }
    failing = ActiveSupport::Notifications.subscribe("lock_lost.ferrolock") { raise "boom" }
    expect { Ferrolock.instrument(:lock_lost, name: "x") }.not_to raise_error
    expect(log.string).to include("ActiveSupport::Notifications for lock_lost failed", "boom")
  ensure
    ActiveSupport::Notifications.unsubscribe(failing)
    Ferrolock.reset_config!
  end
end
