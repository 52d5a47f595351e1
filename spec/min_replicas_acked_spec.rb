# frozen_string_literal: true

require "spec_helper"
require_relative "support/replicated_redis"

# min_replicas_acked: n: a grant must reach n replicas (WAIT, same round trip) before the caller
# enters; otherwise it is given back and Ferrolock::ReplicationError raised.
RSpec.describe "min_replicas_acked" do
  include_context "with a primary and one replica"

  let(:client) { Ferrolock::Client.new(url: @primary.url, namespace: "acks") }
  let(:primary) { @primary.redis }

  def replica_keys
    @replica.redis.keys("acks:*")
  end

  it "enters once the replica holds the grant, for every primitive" do
    m = Ferrolock::DistMutex.new("acked", client: client, min_replicas_acked: 1)
    m.synchronize do
      # WAIT returned 1 before lock did: the grant is on the replica now.
      expect(@replica.redis.get("acks:{acked}:lock")).not_to be_nil
    end

    limiter = Ferrolock::ConcurrentLimiter.new("acked", 2, client: client, min_replicas_acked: 1)
    # Slot tokens only: the "{limit}" member scores -limit.
    expect(limiter.within_limit { @replica.redis.zcount("acks:{acked}:slots", "(0", "+inf") }).to eq(1)

    lock = Ferrolock::DualLock.new("acked-run", client: client, min_replicas_acked: 1)
    ran = nil
    expect(lock.run { ran = @replica.redis.exists("acks:{acked-run}:exec") }).to be(true)
    expect(ran).to eq(1)
  end

  it "raises ReplicationError naming n, the acknowledgements and the server, and gives the grant back" do
    @replica.pause # the replica cannot acknowledge
    m = Ferrolock::DistMutex.new("unacked", client: client, min_replicas_acked: 1, lease: 3)
    error = nil
    expect { m.lock }.to raise_error(Ferrolock::ReplicationError) { |e| error = e }
    expect(error).to be_a(Ferrolock::ConnectionError)
    expect(error.message).to include("only 0 of 1 replica(s) of 127.0.0.1:#{@primary.port}")
    expect(m.owned?).to be(false)
    # Given back at once (token-checked), not left to expire after the lease.
    expect(primary.exists("acks:{unacked}:lock")).to eq(0)
    again = Ferrolock::DistMutex.new("unacked", client: client)
    expect(again.try_lock).to be(true)
    again.unlock

    limiter = Ferrolock::ConcurrentLimiter.new("unacked", 1, client: client, min_replicas_acked: 1, lock_timeout: 3)
    ran = false
    expect { limiter.within_limit { ran = true } }.to raise_error(Ferrolock::ReplicationError)
    expect(ran).to be(false)
    expect(primary.zcount("acks:{unacked}:slots", "(0", "+inf")).to eq(0)

    lock = Ferrolock::DualLock.new("unacked-run", client: client, min_replicas_acked: 1, exec_ttl: 3)
    expect { lock.run { ran = true } }.to raise_error(Ferrolock::ReplicationError)
    expect(ran).to be(false)
    expect(primary.exists("acks:{unacked-run}:exec")).to eq(0)
  end

  # An acquisition cut short while WAIT waits (Thread#wakeup here; on Ruby 3.3 the SIGCHLD of a
  # stopped child does it too) runs again with its token on a fresh connection and finds the grant
  # its own: that retry must write, or its WAIT counts acknowledgements of older writes.
  it "does not count the replica for a grant whose acquisition was cut short and retried",
     :aggregate_failures, time_limit: 60 do
    @replica.pause
    # WAIT may wait 2 s (half the read timeout): time enough to cut it short.
    patient = Ferrolock::Client.new(url: @primary.url, namespace: "acks", read_timeout: 4)
    entered = []
    acquisitions = {
      -> { Ferrolock::DistMutex.new("retried", client: patient, min_replicas_acked: 1, lease: 30).lock } =>
        -> { primary.exists("acks:{retried}:lock") == 1 },
      lambda {
        Ferrolock::ConcurrentLimiter.new("retried", 1, client: patient, min_replicas_acked: 1)
                                    .within_limit { entered << :limiter }
      } => -> { primary.zcount("acks:{retried}:slots", "(0", "+inf") == 1 },
      lambda {
        Ferrolock::DualLock.new("retried-run", client: patient, min_replicas_acked: 1, lease: 30).run do
          entered << :run
        end
      } => -> { primary.exists("acks:{retried-run}:exec") == 1 }
    }
    acquisitions.each do |acquire, granted|
      waiter = Thread.new(&acquire)
      waiter.report_on_exception = false
      deadline = Ferrolock.monotonic + 10
      sleep 0.002 until granted.call || Ferrolock.monotonic > deadline
      waiter.wakeup if waiter.alive?
      expect { waiter.value }.to raise_error(Ferrolock::ReplicationError, /only 0 of 1/)
    end
    expect(entered).to be_empty
  end

  it "asks for nothing with 0 (the default), and takes the default from configure" do
    @replica.pause
    expect(Ferrolock::DistMutex.new("plain", client: client).synchronize { :ran }).to eq(:ran)
    Ferrolock.configure { |c| c.min_replicas_acked = 1 }
    expect { Ferrolock::DistMutex.new("configured", client: client).lock }
      .to raise_error(Ferrolock::ReplicationError)
    # An explicit 0 overrides the configured default.
    explicit = Ferrolock::DistMutex.new("configured", client: client, min_replicas_acked: 0)
    expect(explicit.try_lock).to be(true)
    explicit.unlock
  ensure
    Ferrolock.configure { |c| c.min_replicas_acked = 0 }
  end

  it "waits for more replicas than exist only as long as the bound (a third of the lease, half the read timeout)" do
    m = Ferrolock::DistMutex.new("two", client: client, min_replicas_acked: 2, lease: 30)
    started = Ferrolock.monotonic
    expect { m.lock }.to raise_error(Ferrolock::ReplicationError, /only 1 of 2/)
    # read_timeout is 1 s, so WAIT gave up after 0.5 s; generous for a loaded VM.
    expect(Ferrolock.monotonic - started).to be < 10
  end

  it "rejects a bad value, naming the argument" do
    [-1, 101].each do |bad|
      expect { Ferrolock::DistMutex.new("x", client: client, min_replicas_acked: bad) }
        .to raise_error(ArgumentError, /min_replicas_acked/)
      expect { Ferrolock.config.min_replicas_acked = bad }.to raise_error(ArgumentError, /min_replicas_acked/)
    end
    ["1", 1.0, true].each do |bad|
      expect { Ferrolock::ConcurrentLimiter.new("x", 1, client: client, min_replicas_acked: bad) }
        .to raise_error(TypeError, /min_replicas_acked/)
      expect { Ferrolock::DualLock.new("x", client: client, min_replicas_acked: bad) }
        .to raise_error(TypeError, /min_replicas_acked/)
    end
    expect { Ferrolock::Native::DistMutex.new(client.native, "x", nil, true, 30.0, 1 << 40, 8, true, true) }
      .to raise_error(ArgumentError, /min_replicas_acked/)
  end
end
