# frozen_string_literal: true

require "fileutils"
require "tmpdir"
require_relative "redis_server"
require_relative "timing"

module FerrolockTest
  # A throwaway Sentinel setup: a primary, one replica and 3 sentinels (`redis-server <conf>
  # --sentinel`) on free loopback ports, down-after 1000 ms, so a failover takes a few seconds.
  # Killed at exit. With password:, the sentinels require it (requirepass) and authenticate to
  # each other with it.
  class RedisSentinel
    include Timing

    NAME = "mymaster"
    SENTINELS = 3
    DOWN_AFTER_MS = 1000
    # Also how long sentinels wait before turning a demoted primary that is still up into a replica.
    FAILOVER_TIMEOUT_MS = 2000
    TIMEOUT = 60

    attr_reader :servers, :sentinels, :password

    def initialize(password: nil)
      @password = password
      # Full syncs start at once (Redis waits 5 s by default for more replicas to share one).
      quick_sync = ["--repl-diskless-sync-delay", "0"]
      @servers = [RedisServer.new(extra_args: quick_sync), nil]
      @servers[1] = RedisServer.new(extra_args: [*quick_sync, "--replicaof", RedisServer::HOST, @servers[0].port.to_s])
      @dir = Dir.mktmpdir("ferrolock-sentinel-")
      @sentinels = Array.new(SENTINELS) { Sentinel.new(File.join(@dir, "s#{_1}"), self) }
      @owner = Process.pid
      at_exit { destroy if Process.pid == @owner }
    end

    def start
      servers.each(&:start)
      # The primary's port moves if another suite took it first: --replicaof named the first choice.
      servers[1].redis.call("REPLICAOF", RedisServer::HOST, servers[0].port.to_s)
      sentinels.each(&:start)
      what = -> { "the replica in sync and every sentinel seeing it and the other sentinels (#{states})" }
      wait_for(what) { replica_synced?(servers[1]) && sentinels.all?(&:ready?) }
      self
    end

    # One per process, started on first use (README snippets, bin/bench), with a password.
    def self.shared
      @shared ||= new(password: "sentinel-secret").start
    end

    # Sentinel URLs, with the password when the sentinels require one (unless with_password: false).
    def urls(with_password: true)
      auth = ":#{password}@" if password && with_password
      sentinels.map { |s| "redis://#{auth}#{RedisServer::HOST}:#{s.port}" }
    end

    # The RedisServer the sentinels name as primary now.
    def primary
      port = sentinels.lazy.map { |s| primary_port(s) }.find(&:itself)
      servers.find { |s| s.port == port } or raise "no sentinel names a primary"
    end

    def replica
      (servers - [primary]).first
    end

    # How many times the sentinels moved the primary: the most `+switch-master` lines in one
    # sentinel's log (each logs every switch it learns of; an election that failed logs none).
    def primary_switches
      sentinels.map(&:switches).max || 0
    end

    # SENTINEL FAILOVER; returns the new primary once it is promoted and the old one follows it.
    def failover
      old = primary
      wait_for("a replica in sync to promote") { replica_synced?(replica) }
      asked = nil
      wait_for("a failover away from port #{old.port}") do
        # Sentinel may refuse (NOGOODSLAVE while its view of the replica is stale) or stall a
        # failover: ask again every few seconds until the primary moved (INPROG is harmless).
        if asked.nil? || Process.clock_gettime(Process::CLOCK_MONOTONIC) - asked > 4
          asked = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          begin
            sentinels.first.call("SENTINEL", "FAILOVER", NAME)
          rescue Redis::CommandError
            nil
          end
        end
        primary != old && role(primary) == "master"
      end
      # The sentinels would demote the old primary themselves, but only ~10 s later.
      old.redis.call("REPLICAOF", RedisServer::HOST, primary.port)
      wait_for("port #{old.port} to follow the new primary") { replica_synced?(old) }
      primary
    end

    # kill -9 the primary; returns the promoted replica. The dead one is started again as a
    # replica of the new primary, so the setup has two servers again.
    def kill_primary
      old = primary
      wait_for("a replica in sync to promote") { replica_synced?(replica) }
      Process.kill("KILL", old.pid)
      old.stop
      wait_for("the sentinels to promote the replica") { primary != old && role(primary) == "master" }
      old.start
      # The sentinels would turn it into a replica themselves, after their next look at it (~10 s;
      # once not within TIMEOUT on a loaded CI machine): as failover does, say it at once.
      old.redis.call("REPLICAOF", RedisServer::HOST, primary.port)
      wait_for("port #{old.port} to rejoin as a replica") { replica_synced?(old) }
      primary
    end

    def destroy
      sentinels.each(&:stop)
      servers.each(&:destroy)
      FileUtils.rm_rf(@dir)
    end

    private

    # For a setup that never settles: what each part says, so the failure can be read.
    def states
      replica = replica_synced?(servers[1]) ? "replica in sync" : "replica not in sync"
      seen = sentinels.map do |s|
        "sentinel :#{s.port} #{s.ready? ? "ready" : "not ready: #{s.log_tail.lines.last(2).join.strip}"}"
      end
      [replica, *seen].join("; ")
    end

    def primary_port(sentinel)
      addr = sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", NAME)
      addr && Integer(addr[1])
    rescue Redis::BaseError, SystemCallError
      nil
    end

    def role(server)
      server.redis.call("ROLE").first
    rescue Redis::BaseError
      nil
    end

    def replica_synced?(server)
      server.redis.call("INFO", "replication").include?("master_link_status:up")
    rescue Redis::BaseError
      false
    end

    def wait_for(what, timeout: TIMEOUT, &block)
      described = what.respond_to?(:call) ? -> { "Redis Sentinel: #{what.call}" } : "Redis Sentinel: #{what}"
      wait_until(timeout: timeout, interval: 0.1, what: described, &block)
    end

    # One sentinel process, its config file in its own directory (sentinels rewrite it).
    class Sentinel
      attr_reader :port

      def initialize(dir, setup)
        @dir = dir
        @setup = setup
        @port = RedisServer.free_port
        @pid = nil
      end

      # Waits until it answers; takes another port if its own went elsewhere before the bind.
      def start
        FileUtils.mkdir_p(@dir)
        5.times do
          File.write(conf, config_text)
          @pid = Process.spawn("redis-server", conf, "--sentinel", out: log, err: %i[child out], pgroup: true)
          return self if answering?

          stop
          raise "sentinel on port #{port} did not start: #{log_tail}" unless log_tail.include?("Address already in use")

          @port = RedisServer.free_port
        end
        raise "no free port for a sentinel"
      end

      def log_tail
        File.read(log).lines.last(5).join
      rescue Errno::ENOENT
        ""
      end

      def switches
        File.foreach(log).count { |line| line.include?("+switch-master") }
      rescue Errno::ENOENT
        0
      end

      # Knows the primary, its replica and the 2 other sentinels.
      def ready?
        reply = call("SENTINEL", "MASTER", RedisSentinel::NAME)
        # A flat list from redis-rb 4, a Hash from redis-rb 5+ (redis-client), as on Ruby 3.3.
        info = reply.is_a?(Hash) ? reply : reply.each_slice(2).to_h
        info["num-slaves"].to_i >= 1 && info["num-other-sentinels"].to_i == RedisSentinel::SENTINELS - 1
      rescue Redis::BaseError, SystemCallError
        false
      end

      def call(*args)
        client.call(*args)
      end

      def stop
        return unless @pid

        Process.kill("KILL", @pid)
        Process.wait(@pid)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      ensure
        @pid = nil
        @client&.close
        @client = nil
      end

      private

      def client
        @client ||= Redis.new(host: RedisServer::HOST, port: port, password: @setup.password, timeout: 5)
      end

      def conf
        File.join(@dir, "sentinel.conf")
      end

      def log
        File.join(@dir, "sentinel.log")
      end

      def answering?
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + RedisServer::BOOT_TIMEOUT
        until Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
          return false if Process.waitpid(@pid, Process::WNOHANG)
          # This sentinel, not another suite's server that took the port first.
          return true if FerrolockTest.redis_answering_as?(RedisServer::HOST, port, @pid, password: @setup.password)

          sleep 0.02
        end
        false
      end

      def config_text
        name = RedisSentinel::NAME
        primary = @setup.servers.first
        lines = ["port #{port}", "bind #{RedisServer::HOST}", "dir #{@dir}", "daemonize no",
                 "sentinel monitor #{name} #{RedisServer::HOST} #{primary.port} 2",
                 "sentinel down-after-milliseconds #{name} #{RedisSentinel::DOWN_AFTER_MS}",
                 "sentinel failover-timeout #{name} #{FAILOVER_TIMEOUT_MS}", "sentinel parallel-syncs #{name} 1"]
        lines += ["requirepass #{@setup.password}", "sentinel sentinel-pass #{@setup.password}"] if @setup.password
        "#{lines.join("\n")}\n"
      end
    end
  end
end
