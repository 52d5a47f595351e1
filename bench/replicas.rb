# frozen_string_literal: true

require_relative "support/replicated_pair"

# The cost of min_replicas_acked: 1: uncontended DistMutex lock+unlock cycles on a primary with
# one replica (both on loopback), with and without waiting for the replica's acknowledgement
# (the grant's EVALSHA and WAIT 1 share one round trip; WAIT returns once the replica has
# applied the write).
module ReplicasBench
  CYCLES = 5_000
  ROUNDS = 3

  module_function

  def cycles_per_second(client, acks)
    m = Ferrolock::DistMutex.new("bench:replicas:#{acks}", client: client, min_replicas_acked: acks)
    Bench.ops_per_second(ops: CYCLES) { m.synchronize { nil } }
  end
end

Bench.define("replicas") do
  primary, replica = Bench::ReplicatedPair.start
  client = Ferrolock::Client.new(url: primary.url)
  # Alternating rounds, best of each, so neither side pays for a burst of load alone.
  results = Array.new(ReplicasBench::ROUNDS) do
    [ReplicasBench.cycles_per_second(client, 1), ReplicasBench.cycles_per_second(client, 0)]
  end
  table = Bench::Table.new("DistMutex, primary + 1 replica", ours: "min_replicas_acked: 1",
                                                             baseline: "min_replicas_acked: 0")
  table.add("uncontended lock+unlock, 1 thread", ours: results.map(&:first).max, baseline: results.map(&:last).max)
  table.to_s
ensure
  replica&.stop
  primary&.stop
end
