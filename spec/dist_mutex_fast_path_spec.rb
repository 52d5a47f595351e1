# frozen_string_literal: true

# The uncontended path costs its two round trips and nothing else in the process: no other thread
# is woken per lock or unlock, and no getpid system call tells a forked child (issue 27).
RSpec.describe Ferrolock::DistMutex, "uncontended fast path" do
  let(:reaper) { Ferrolock::DistMutex::Reaper }

  # The reaper's state at each signal sent to its condition variable while the block runs: :timed
  # when it was waiting for a look of its own (@wakes_at set), else :untimed (asleep until nudged
  # after its idle ticks, or between two looks). Read under the reaper's lock, as nudge signals.
  def reaper_signals
    owner = reaper
    wake = owner.instance_variable_get(:@wake)
    states = []
    counting = Module.new do
      define_method(:signal) do
        states << (owner.instance_variable_get(:@wakes_at) ? :timed : :untimed)
        super()
      end
    end
    wake.singleton_class.prepend(counting)
    yield
    states
  ensure
    counting&.send(:remove_method, :signal)
  end

  # A lock wakes the reaper only when it would not look in time by itself. On an idle machine the
  # 200 locks end within its first idle ticks: one signal at most. On a loaded one they may outlast
  # its IDLE_TICKS (it then sleeps until nudged, and the next lock wakes it), or find it between two
  # looks, woken but not yet waiting again: signals then are right, and how many depends on the
  # machine. So each signal is judged by the reaper's own state when it was sent: none may wake a
  # reaper that was waiting for a look of its own; and most locks send none.
  it "does not wake the reaper thread on every lock" do
    m = described_class.new("fast:reaper")
    m.synchronize { nil } # starts the reaper
    sleep 0.2 # it runs its first look and waits
    started = monotonic
    states = reaper_signals { 200.times { m.synchronize { nil } } }
    said = "#{states.size} signals in 200 locks (#{monotonic - started} s): #{states.tally}"
    expect(states.count(:timed)).to eq(0), said
    expect(states.size).to be < 50, said
  end

  it "tells a forked child without asking the OS for the pid on every call" do
    m = described_class.new("fast:pid")
    m.synchronize { nil }
    allow(Process).to receive(:pid).and_call_original
    100.times { m.synchronize { nil } }
    expect(Process).not_to have_received(:pid)
  end
end
