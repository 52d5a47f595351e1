# frozen_string_literal: true

RSpec.describe "Ferrolock events" do
  let(:received) { [] }
  let!(:subscription) { Ferrolock.subscribe { |event, payload| received << [event, payload] } }

  after { Ferrolock.unsubscribe(subscription) }

  it "calls subscribers with the event name and payload" do
    Ferrolock.instrument(:acquired, name: "report", duration: 0.25)
    expect(received).to eq([[:acquired, { name: "report", duration: 0.25 }]])
  end

  it "filters by event name when names are given" do
    only_waits = []
    filtered = Ferrolock.subscribe(:waited) { |event, _| only_waits << event }
    Ferrolock.instrument(:acquired, {})
    Ferrolock.instrument(:waited, duration: 0.1)
    expect(only_waits).to eq([:waited])
  ensure
    Ferrolock.unsubscribe(filtered)
  end

  it "stops calling a subscriber after unsubscribe" do
    expect(Ferrolock.unsubscribe(subscription)).to be(true)
    Ferrolock.instrument(:skipped, {})
    expect(received).to be_empty
    expect(Ferrolock.unsubscribe(subscription)).to be(false)
  end

  it "logs a failing subscriber and never raises into the caller" do
    log = StringIO.new
    Ferrolock.configure { |c| c.logger = Logger.new(log) }
    failing = Ferrolock.subscribe { raise "boom" }
    expect { Ferrolock.instrument(:over_limit, name: "api") }.not_to raise_error
    expect(log.string).to include("over_limit", "boom")
    expect(received.map(&:first)).to eq([:over_limit])
  ensure
    Ferrolock.unsubscribe(failing)
    Ferrolock.reset_config!
  end

  it "requires a block" do
    expect { Ferrolock.subscribe(:acquired) }.to raise_error(ArgumentError, /block/)
  end

  context "with ActiveSupport::Notifications loaded" do
    before { require "active_support/notifications" }

    it "publishes <event>.ferrolock" do
      seen = []
      sub = ActiveSupport::Notifications.subscribe("lock_lost.ferrolock") { |*args| seen << args.last }
      Ferrolock.instrument(:lock_lost, name: "sync")
      expect(seen).to eq([{ name: "sync" }])
    ensure
      ActiveSupport::Notifications.unsubscribe(sub)
    end
  end
end
