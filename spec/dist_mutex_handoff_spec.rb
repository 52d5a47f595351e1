# frozen_string_literal: true

require_relative "support/replicated_redis"

# Contended DistMutex: a release hands the lock straight to the first process still waiting, in
# the order they queued; a waiter killed after the hand-off blocks the others one lease at most.
RSpec.describe "DistMutex hand-off across processes" do
  let(:server) { FerrolockTest.redis_server }
  let(:redis) { server.redis }
  let(:client) { Ferrolock::Client.new(url: server.url, namespace: "ho") }

  def queued(name)
    redis.call("LLEN", "ho:{#{name}}:waiters")
  end

  def until_queued(name, count)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
    until queued(name) >= count
      raise "#{count} waiters never queued" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.002
    end
  end

  # A child process that waits for the lock, then runs the block inside it.
  def waiting_child(name, lease:, &section)
    fork_child { Ferrolock::DistMutex.new(name, lease: lease, client: client).synchronize(timeout: 30, &section) }
  end

  it "hands the lock to waiting processes in the order they queued" do
    holder = Ferrolock::DistMutex.new("fifo", lease: 30, client: client)
    holder.lock
    pids = Array.new(4) do |i|
      pid = waiting_child("fifo", lease: 30) { client.call("RPUSH", "entered", i.to_s) }
      until_queued("fifo", i + 1)
      pid
    end
    holder.unlock
    expect_children_succeed(pids)
    expect(redis.call("LRANGE", "entered", 0, -1)).to eq(%w[0 1 2 3])
    expect(holder.locked?).to be(false)
  end

  # One waiter per process per name: the others wait in the process, and each release queues the
  # next of them (DistMutex objects are built per call, so the line is the client's and name's).
  it "keeps one entry per process in the Redis line while its threads wait" do
    holder = Ferrolock::DistMutex.new("local", lease: 30, client: client)
    holder.lock
    started = Queue.new
    entered = Queue.new
    threads = Array.new(4) do |i|
      Thread.new do
        started << i
        Ferrolock::DistMutex.new("local", lease: 30, client: client).synchronize(timeout: 30) { entered << i }
      end
    end
    4.times { started.pop }
    until_queued("local", 1)
    # Long enough for every thread to have queued in Redis, had each its own entry.
    longest = Array.new(50) do
      sleep 0.01
      queued("local")
    end.max
    expect(longest).to eq(1)
    holder.unlock
    threads.each(&:join)
    expect(Array.new(entered.size) { entered.pop }.sort).to eq([0, 1, 2, 3])
    expect(queued("local")).to eq(0)
    expect(holder.locked?).to be(false)
  end

  it "lets a waiter killed after the hand-off block the others for one lease at most" do
    lease = 1.0
    holder = Ferrolock::DistMutex.new("killed", lease: lease, client: client)
    holder.lock
    victim = waiting_child("killed", lease: lease) { sleep 60 }
    until_queued("killed", 1)
    Process.kill(:KILL, victim)
    Process.wait(victim)
    # The victim is still first in line: the release hands it the lock, which nobody renews.
    holder.unlock
    expect(holder.locked?).to be(true)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Ferrolock::DistMutex.new("killed", lease: lease, client: client).synchronize(timeout: 20) { :ok }
    waited = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    # One lease plus slack for a loaded VM; the bound that matters is "not 20 s".
    expect(waited).to be < lease + 3
  end

  describe "with min_replicas_acked" do
    include_context "with a primary and one replica"

    let(:client) { Ferrolock::Client.new(url: @primary.url, namespace: "ho") }
    let(:redis) { @primary.redis }

    # The holder enters without acknowledgements; the waiter, asking for 1, waits in line behind it.
    def handed_to_waiter(name, &section)
      holder = Ferrolock::DistMutex.new(name, lease: 3, client: client)
      holder.lock
      waiter = Thread.new do
        Thread.current.report_on_exception = false # the refused hand-off raises on purpose
        m = Ferrolock::DistMutex.new(name, lease: 3, client: client, min_replicas_acked: 1)
        m.synchronize(timeout: 20, &section)
      end
      until_queued(name, 1)
      [holder, waiter]
    end

    it "enters a handed-over lock once the replica holds the grant" do
      key = "ho:{acked}:lock"
      holder, waiter = handed_to_waiter("acked") { [redis.get(key), @replica.redis.get(key)] }
      holder.unlock
      on_primary, on_replica = waiter.value
      # The waiter's token, not the previous holder's, was on the replica when it entered.
      expect(on_replica).to eq(on_primary)
    end

    it "hands on a grant the replica did not acknowledge and raises ReplicationError" do
      holder, waiter = handed_to_waiter("unacked") { :entered }
      @replica.pause
      holder.unlock
      expect { waiter.join }.to raise_error(Ferrolock::ReplicationError)
      expect(redis.exists("ho:{unacked}:lock")).to eq(0)
    end
  end
end
