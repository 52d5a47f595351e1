# frozen_string_literal: true

# Ferrolock::Native.renewed_leases counts what the process holds, for every primitive, and the suite's
# check (spec/support/holds_left.rb) fails an example that leaves a hold behind instead of the
# example a later flush would report :lock_lost in.
RSpec.describe "holds an example leaves behind", time_limit: 30 do
  # Runs `hold` in a thread until `done` is popped; returns [thread, done] once the hold is taken.
  def hold_in_thread(&hold)
    taken = Queue.new
    done = Queue.new
    inside = lambda do
      taken << true
      done.pop
    end
    thread = Thread.new { hold.call(inside) }
    taken.pop
    [thread, done]
  end

  # Lets a hold_in_thread's thread give its hold back and end.
  def give_back(thread, done)
    done << true
    thread.join
  end

  # Stands in for an RSpec example: HoldsLeft.run only calls #run.
  def example_that(&body) = Struct.new(:body) { def run = body.call }.new(body)

  it "counts one lease per hold, for each primitive, and none once given back" do
    limiter = Ferrolock::ConcurrentLimiter.new("holds-left-limiter", 2)
    mutex = Ferrolock::DistMutex.new("holds-left-mutex")
    before = Ferrolock::Native.renewed_leases
    holds = [
      hold_in_thread { |inside| limiter.within_limit(&inside) },
      hold_in_thread { |inside| limiter.within_limit(&inside) },
      hold_in_thread { |inside| mutex.synchronize(&inside) }
    ]
    expect(Ferrolock::Native.renewed_leases - before).to eq(3)

    holds.each { |thread, done| give_back(thread, done) }
    expect(Ferrolock::Native.renewed_leases).to eq(before)
  end

  it "fails an example whose thread still holds a slot, naming how many leases it left" do
    limiter = Ferrolock::ConcurrentLimiter.new("holds-left-slot", 1)
    left = nil
    leaving = example_that { left = hold_in_thread { |inside| limiter.within_limit(&inside) } }
    expect { FerrolockTest::HoldsLeft.run(leaving, settle: 0.2) }
      .to raise_error(RuntimeError, /this example left 1 lease\(s\) renewed/)
  ensure
    give_back(*left) if left
  end

  it "passes an example whose thread gave its slot back just after it ended" do
    limiter = Ferrolock::ConcurrentLimiter.new("holds-left-late", 1)
    finishing = example_that do
      thread, done = hold_in_thread { |inside| limiter.within_limit(&inside) }
      Thread.new do
        sleep 0.1
        give_back(thread, done)
      end
    end
    expect { FerrolockTest::HoldsLeft.run(finishing, settle: 5) }.not_to raise_error
  end

  it "fails an example that leaves a DistMutex locked by its own thread, naming it" do
    mutex = Ferrolock::DistMutex.new("holds-left-locked")
    expect { FerrolockTest::HoldsLeft.run(example_that { mutex.lock }, settle: 0.2) }
      .to raise_error(RuntimeError, /left "holds-left-locked" held by its thread/)
  ensure
    mutex&.unlock if mutex&.owned?
  end
end
