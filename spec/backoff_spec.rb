# frozen_string_literal: true

# The one backoff curve (Ferrolock::Backoff) of jobs pushed back for later.
RSpec.describe Ferrolock::Backoff do
  it "doubles from 1 s, caps at MAX, and adds up to JITTER of it" do
    { 0 => 1, 1 => 1, 2 => 2, 3 => 4, 9 => 256, 10 => 300, 50 => 300 }.each do |count, base|
      delays = Array.new(200) { described_class.delay(count) }
      expect(delays).to all(be_between(base, base * (1 + described_class::JITTER)))
      expect(delays.uniq.size).to be > 1 # jittered, not lockstep
    end
  end

  it "is the curve of Sidekiq's reschedules, ActiveJob's dual_lock and concurrency rules" do
    srand(7)
    expected = described_class.delay(3)
    srand(7)
    expect(Ferrolock::Sidekiq::Reschedule.backoff(3)).to eq(expected)
  end

  it "takes a backoff proc's usable answer, else the curve after saying why" do
    said = []
    warn = ->(why) { said << why }
    expect(described_class.answered(2, proc {}, warn) { 7.5 }).to eq(7.5)
    expect(described_class.answered(2, proc {}, warn) { -1 }).to be_between(2, 3)
    expect(described_class.answered(2, nil, warn) { raise "not called" }).to be_between(2, 3)
    expect(said).to eq(["backoff returned -1; using the default backoff"])
  end
end
