# frozen_string_literal: true

# The uncontended path costs its two round trips and nothing else in the process: no other thread
# is woken per lock or unlock, and no getpid system call tells a forked child (issue 27).
RSpec.describe Ferrolock::DistMutex, "uncontended fast path" do
  let(:reaper) { Ferrolock::DistMutex::Reaper }

  # Signals sent to the reaper thread's condition variable while the block runs.
  def reaper_signals
    wake = reaper.instance_variable_get(:@wake)
    count = 0
    counting = Module.new do
      define_method(:signal) do
        count += 1
        super()
      end
    end
    wake.singleton_class.prepend(counting)
    yield
    count
  ensure
    counting&.send(:remove_method, :signal)
  end

  it "does not wake the reaper thread on every lock" do
    m = described_class.new("fast:reaper")
    m.synchronize { nil } # starts the reaper
    sleep 0.2 # it runs its first look and waits
    signals = reaper_signals { 200.times { m.synchronize { nil } } }
    expect(signals).to be <= 1
  end

  it "tells a forked child without asking the OS for the pid on every call" do
    m = described_class.new("fast:pid")
    m.synchronize { nil }
    allow(Process).to receive(:pid).and_call_original
    100.times { m.synchronize { nil } }
    expect(Process).not_to have_received(:pid)
  end
end
