# frozen_string_literal: true

module Bench
  # A throwaway primary with one replica, both on loopback: what a one-node setup with a replica
  # costs per write (the primary feeds the replica before it answers, and on 2 cores the replica
  # process competes with the client and the primary).
  module ReplicatedPair
    module_function

    # [primary, replica] (Demo::ThrowawayRedis), the replica's link up. Stop both when done.
    def start
      primary = Demo::ThrowawayRedis.new(prefix: "ferrolock-bench-primary-").start
      replica = Demo::ThrowawayRedis.new(
        extra_args: ["--appendonly", "no", "--replicaof", "127.0.0.1", primary.port.to_s],
        prefix: "ferrolock-bench-replica-"
      ).start
      wait_for_link(replica)
      [primary, replica]
    rescue StandardError
      replica&.stop
      primary&.stop
      raise
    end

    def wait_for_link(replica)
      client = Ferrolock::Client.new(url: replica.url)
      200.times do
        return if client.call("INFO", "replication").include?("master_link_status:up")

        sleep 0.05
      end
      raise "bench: the replica never synced"
    end
  end
end
