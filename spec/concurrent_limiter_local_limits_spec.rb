# frozen_string_literal: true

require "ferrolock"

# The operators' view shows the limit this process passes beside the stored one; a process that
# made many limiters first (one per tenant, or the hygiene spec's 100k) must still show a new one.
RSpec.describe Ferrolock::ConcurrentLimiter::LocalLimits do
  let(:max) { described_class::MAX }

  it "keeps the most recently made names when more than MAX were made" do
    (max + 5).times { |i| described_class.record("ll-spec", "old-#{i}", 1) }
    described_class.record("ll-spec", "newest", 7)
    expect(described_class["ll-spec", "newest"]).to eq(7)
    expect(described_class["ll-spec", "old-0"]).to be_nil # the oldest went
    expect(described_class["ll-spec", "old-#{max + 4}"]).to eq(1)
  end

  it "lets the latest limiter of a name win, and keeps that name when it is re-made" do
    described_class.record("ll-spec", "re", 3)
    described_class.record("ll-spec", "re", 5)
    max.times { |i| described_class.record("ll-spec", "fill-#{i}", 1) if i < max - 1 }
    described_class.record("ll-spec", "re", 6) # re-made: moves to the newest end
    described_class.record("ll-spec", "one-more", 1)
    expect(described_class["ll-spec", "re"]).to eq(6)
  end
end
