# frozen_string_literal: true

# LockLost says why the hold was lost: an operator's force release (it leaves a tombstone key for
# an hour), another owner holding the lock now, or a lease that simply ran out.
RSpec::Matchers.define_negated_matcher :exclude, :include unless RSpec::Matchers.method_defined?(:exclude)

RSpec.describe "why LockLost says a hold was lost" do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:admin) { Ferrolock::Admin.new }
  let(:lease) { 0.6 }

  def lost_message
    yield
    raise "no LockLost"
  rescue Ferrolock::LockLost => e
    e.message
  end

  it "names an operator's force release of a DistMutex, a DualLock run and a ConcurrentLimiter slot" do
    messages = {
      mutex: lost_message do
        Ferrolock::DistMutex.new("forced-m", lease: lease).synchronize { admin.force_release("forced-m") }
      end,
      dual: lost_message do
        Ferrolock::DualLock.new("forced-d", exec_ttl: lease).run { admin.force_release("forced-d") }
      end,
      limiter: lost_message do
        Ferrolock::ConcurrentLimiter.new("forced-l", 2, lock_timeout: lease).within_limit do
          admin.force_release("forced-l")
        end
      end
    }
    messages.each do |kind, message|
      expect(message).to include("force-released"), "#{kind}: #{message}"
      expect(message).not_to include("expired"), "#{kind}: #{message}"
    end
    # The tombstones expire: at most an hour.
    tombstones = redis.keys("ferrolock:{forced-*}:forced:*")
    expect(tombstones.size).to eq(3)
    expect(tombstones.map { |key| redis.pttl(key) }).to all(be_between(1, 3_600_000))
  end

  it "tells a lease that ran out from a lock another owner took" do
    expired = lost_message do
      Ferrolock::DistMutex.new("gone-m", lease: lease).synchronize { redis.del("ferrolock:{gone-m}:lock") }
    end
    expect(expired).to include("lease expired without renewal").and(exclude("another owner", "force-released"))

    taken = lost_message do
      Ferrolock::DistMutex.new("taken-m", lease: lease).synchronize { redis.set("ferrolock:{taken-m}:lock", "other") }
    end
    expect(taken).to include("another owner took it").and(exclude("force-released"))

    slot = lost_message do
      Ferrolock::ConcurrentLimiter.new("gone-l", 2, lock_timeout: lease).within_limit do
        redis.del("ferrolock:{gone-l}:slots")
      end
    end
    expect(slot).to include("lease expired without renewal").and(exclude("force-released"))
  end
end
