# frozen_string_literal: true

# The one shape of option parsing (Ferrolock::OptionCheck): unknown keys and value errors name the owner.
RSpec.describe Ferrolock::OptionCheck do
  it "refuses unknown keys naming the owner, the keys and the known ones" do
    expect(described_class.known!(%i[a], %i[a b], "Owner")).to be_nil
    expect { described_class.known!([:c, "d"], %i[a b], "Owner", kind: "x option") }
      .to raise_error(ArgumentError, 'Owner: unknown x options :c, "d" (known: a, b)')
  end

  it "prefixes a value check's error with the owner and option, keeping or setting its class" do
    expect(described_class.value("O lease:") { 1 }).to eq(1)
    expect { described_class.value("O lease:") { raise TypeError, "bad" } }.to raise_error(TypeError, "O lease: bad")
    expect { described_class.value("O lease:", raise_as: ArgumentError) { raise TypeError, "bad" } }
      .to raise_error(ArgumentError, "O lease: bad")
  end

  it "is the shape of DualLock's, Shoryuken's and limits_concurrency's errors" do
    klass = Class.new { def self.name = "OptJob" }
    expect { Ferrolock::Sidekiq::DualLock::Settings.new(klass, { nope: 1 }) }
      .to raise_error(ArgumentError, /\AOptJob: unknown dual_lock option :nope \(known: key, lease/)
    expect { Ferrolock::Shoryuken::Options.validate({ nope: 1 }, "Shoryuken.configure") }
      .to raise_error(ArgumentError, /\AShoryuken.configure: unknown option :nope \(known: enabled/)
    expect { Ferrolock::ActiveJob::ConcurrencyPolicy.new(key: "k", to: 0) }
      .to raise_error(ArgumentError, /\Alimits_concurrency to: /)
  end
end
