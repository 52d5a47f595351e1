# frozen_string_literal: true

require "open3"
require_relative "redis_server"
require_relative "timing"

module FerrolockTest
  # A throwaway Redis Cluster: 3 masters + 3 replicas on free loopback ports, each a RedisServer
  # with --cluster-enabled, joined by `redis-cli --cluster create`. Killed at exit. One per
  # process: RedisCluster.shared starts it on first use (specs and bin/bench share it).
  class RedisCluster
    include Timing

    MASTERS = 3
    SLOTS = 16_384
    BOOT_TIMEOUT = 60
    # Short, so a killed master's replica is promoted within a few seconds.
    NODE_TIMEOUT_MS = 1000

    attr_reader :servers

    def self.shared
      @shared ||= new.start
    end

    def initialize
      @servers = Array.new(MASTERS * 2) { node }
    end

    def start
      servers.each(&:start)
      addresses = servers.map { |s| "#{s.host}:#{s.port}" }
      out, status = Open3.capture2e("redis-cli", "--cluster", "create", *addresses,
                                    "--cluster-replicas", "1", "--cluster-yes")
      raise "redis-cli --cluster create failed:\n#{out}" unless status.success?

      wait_until_healthy
      self
    end

    # Seed URLs: every node (a client needs only one that answers).
    def urls
      live.map { |s| "redis://#{s.host}:#{s.port}" }
    end

    def live
      servers.select(&:running?)
    end

    # The slot a ferrolock name's keys live in ("<ns>:{<name>}:<part>" hashes on <name>).
    def self.slot(name)
      crc = 0
      name.to_s.each_byte do |byte|
        crc ^= byte << 8
        8.times { crc = crc.nobits?(0x8000) ? (crc << 1) & 0xffff : ((crc << 1) ^ 0x1021) & 0xffff }
      end
      crc % SLOTS
    end

    # One name per master, each served by a different master, all starting with prefix.
    def names_on_each_master(prefix)
      wanted = masters.map { |m| owned_slots(m) }
      found = Array.new(wanted.size)
      (0..).each do |i|
        name = "#{prefix}-#{i}"
        index = wanted.index { |slots| slots.include?(self.class.slot(name)) }
        found[index] ||= name if index
        return found if found.all?
      end
    end

    # The master RedisServer serving slot, as the cluster says now.
    def master_for(slot)
      masters.find { |m| owned_slots(m).include?(slot) } or raise "no master serves slot #{slot}"
    end

    def masters
      live.select { |s| role(s) == "master" && owned_slots(s).any? }
    end

    def owned_slots(server)
      shards.fetch(node_id(server), [])
    end

    def node_id(server)
      server.redis.call("CLUSTER", "MYID")
    end

    # Moves slot (with its keys) from its master to target, the way redis-cli --cluster reshard
    # does: IMPORTING/MIGRATING, MIGRATE key batches, then SETSLOT NODE everywhere. Clients see
    # ASK during the move and MOVED after it.
    def migrate_slot(slot, to:)
      from = master_for(slot)
      return if from == to

      to.redis.call("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(from))
      from.redis.call("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(to))
      loop do
        keys = from.redis.call("CLUSTER", "GETKEYSINSLOT", slot, 100)
        break if keys.empty?

        from.redis.call("MIGRATE", to.host, to.port, "", 0, 5000, "REPLACE", "KEYS", *keys)
      end
      [to, from, *(masters - [to, from])].each do |m|
        m.redis.call("CLUSTER", "SETSLOT", slot, "NODE", node_id(to))
      end
    end

    # kill -9 a master; returns once its replica serves its slots and the cluster is ok again.
    def kill_master(server)
      slots = owned_slots(server)
      Process.kill("KILL", server.pid)
      server.stop # reaps it
      wait_for("a replica to take over slots #{slots.first}..#{slots.last}") do
        live.any? { |s| role(s) == "master" && (owned_slots(s) & slots).size == slots.size } && state_ok?
      end
    end

    # Starts a killed node again: it rejoins (its nodes.conf is kept) as a replica of the master
    # that took its place, and the cluster is back to 3 masters with synced replicas.
    def revive(server)
      server.start
      wait_until_healthy
    end

    def flushall
      masters.each { |m| m.redis.call("FLUSHALL") }
    end

    def destroy
      servers.each(&:destroy)
    end

    private

    # A node on free ports (its client port and its cluster bus port, both moved by RedisServer#start
    # when another process binds one first: parallel lanes start servers too).
    def node
      RedisServer.new(cluster_node: true, extra_args: [
                        "--cluster-node-timeout", NODE_TIMEOUT_MS.to_s,
                        # A replica promoted after its master died keeps serving at once.
                        "--cluster-replica-validity-factor", "0", "--cluster-require-full-coverage", "no"
                      ])
    end

    def role(server)
      server.redis.call("ROLE").first
    rescue Redis::BaseError
      nil
    end

    # node id => slots it serves, from CLUSTER SLOTS as one live node sees it.
    def shards
      reply = nil
      live.find { |s| reply = cluster_slots(s) }
      raise "Redis Cluster: no live node answers CLUSTER SLOTS" unless reply

      reply.each_with_object(Hash.new { |h, k| h[k] = [] }) do |(first, last, master), table|
        table[master[2]].concat((first..last).to_a)
      end
    end

    def cluster_slots(server)
      server.redis.call("CLUSTER", "SLOTS")
    rescue Redis::BaseError
      nil
    end

    def state_ok?
      live.all? do |s|
        info = s.redis.call("CLUSTER", "INFO")
        info.include?("cluster_state:ok") && info.include?("cluster_slots_ok:#{SLOTS}")
      end
    rescue Redis::BaseError
      false
    end

    # All slots served, every master with a replica in sync: a kill -9 then loses nothing the
    # replica had.
    def wait_until_healthy
      wait_for("cluster_state:ok with #{MASTERS} masters and synced replicas") do
        state_ok? && masters.size == MASTERS &&
          live.count { |s| s.redis.call("INFO", "replication").include?("master_link_status:up") } == MASTERS
      end
    end

    def wait_for(what, timeout: BOOT_TIMEOUT, &block)
      wait_until(timeout: timeout, interval: 0.1, what: "Redis Cluster: #{what}", &block)
    end
  end
end
