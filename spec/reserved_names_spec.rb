# frozen_string_literal: true

require "digest"

# A DistMutex, DualLock or ConcurrentLimiter may not take a name in one of ferrolock's own key
# spaces: `unique:<Class>:<digest>` is a Sidekiq uniqueness lock's key (and `…:run` its run-time lock).
RSpec.describe "reserved name prefixes" do
  let(:digest) { "unique:ReportJob:#{Digest::SHA256.hexdigest("args")}" }

  it "refuses names in the uniqueness key space, naming the argument" do
    uniqueness = Ferrolock::Sidekiq::Unique::Lock.new(digest)
    expect(uniqueness.take("jid-1", 60)).to be_nil # the push-time lock is taken
    {
      "name" => -> { Ferrolock::DistMutex.new(digest) },
      "key" => -> { Ferrolock::DualLock.new("#{digest}:run") },
      "name " => -> { Ferrolock::ConcurrentLimiter.new(:"unique:x", 2) }
    }.each do |arg, build|
      expect(&build).to raise_error(ArgumentError, /\A#{arg.strip} must not start with "unique:"/)
    end
    expect(uniqueness.take("jid-2", 60)).to eq("jid-1") # still the job's, untouched
  end

  it "accepts the uniqueness middleware's own names and every other name" do
    held = [Ferrolock::DistMutex.new(Ferrolock::InternalName.new("#{digest}:run")),
            Ferrolock::DistMutex.new("uniqueness:#{digest}")]
    expect(held.map(&:try_lock)).to eq([true, true])
    expect(Ferrolock::DistMutex.new("report:unique:1").name).to eq("report:unique:1")
  ensure
    held&.each { |mutex| mutex.unlock if mutex.owned? }
  end
end
