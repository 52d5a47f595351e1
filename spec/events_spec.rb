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
    filtered = Ferrolock.subscribe(:wait_timeout, "over_limit") { |event, _| only_waits << event }
    Ferrolock.instrument(:acquired, {})
    Ferrolock.instrument(:wait_timeout, waited: 0.1)
    Ferrolock.instrument(:over_limit, waited: 0.2)
    expect(only_waits).to eq(%i[wait_timeout over_limit])
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

  it "rejects an unknown event name, listing the known ones" do
    expect { Ferrolock.subscribe(:waited) { nil } }
      .to raise_error(ArgumentError, /unknown event :waited \(known: acquired, lock_lost, .*redis_error\)/)
    expect { Ferrolock.subscribe(42) { nil } }.to raise_error(TypeError, /event names/)
    expect(received).to be_empty
  end

  it "gives the seconds waited as :waited for every primitive that waits" do
    mutex = Ferrolock::DistMutex.new("events:mutex")
    mutex.synchronize { nil }
    Ferrolock::DualLock.new("events:dual").run { nil }
    Ferrolock::ConcurrentLimiter.new("events:limit", 1).within_limit { nil }
    acquired = received.select { |event, _| event == :acquired }.map(&:last)
    expect(acquired.map { |payload| payload[:primitive] }).to eq(%i[dist_mutex dual_lock concurrent_limiter])
    expect(acquired).to all(include(waited: be_a(Float).and(be >= 0)))
  end

  it "lists in EVENTS every event the code instruments, and the README names each of them" do
    sources = Dir[File.join(FerrolockTest::LIB, "**", "*.rb")].map { |path| File.read(path) }.join
    instrumented = sources.scan(/instrument\(:(\w+)/).flatten.uniq.map(&:to_sym)
    expect(instrumented - Ferrolock::EVENTS).to eq([])
    readme = File.read(File.join(FerrolockTest::ROOT, "README.md"))
    expect(Ferrolock::EVENTS.reject { |event| readme.include?("`:#{event}`") }).to eq([])
  end

  it "requires a block" do
    expect { Ferrolock.subscribe(:acquired) }.to raise_error(ArgumentError, /block/)
  end

  context "with ActiveSupport::Notifications loaded" do
    # "active_support" first, as every app has it: ActiveSupport 7.2's notifications.rb uses
    # IsolatedExecutionState without requiring it (alone it raises NameError on its first instrument).
    before do
      require "active_support"
      require "active_support/notifications"
    end

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
