# frozen_string_literal: true

require "fileutils"
require "redis"
require "socket"
require "tmpdir"
require_relative "server_process"

module FerrolockTest
  # A throwaway redis-server on a free loopback port (never 6379), in its own
  # temp dir, with persistence off. Killed at exit, even when specs fail.
  class RedisServer
    include ServerProcess

    HOST = "127.0.0.1"
    NAME = "redis-server"
    BOOT_TIMEOUT = 10
    # A cluster node's state file, in its dir.
    CLUSTER_CONFIG = "nodes.conf"

    attr_reader :host, :port, :dir, :pid

    # A port below the kernel's ephemeral range, so no outgoing connection (a replica's, a
    # sentinel's, a client's) can take it between our choice and the server's bind. Random, so
    # two suites running side by side rarely pick the same one; #start picks another if it was.
    def self.free_port
      low, high = listen_port_range
      loop do
        port = rand(low..high)
        next if port == 6379

        begin
          TCPServer.new(HOST, port).close
          return port
        rescue SystemCallError
          next
        end
      end
    end

    def self.ephemeral_low
      @ephemeral_low ||= Integer(File.read("/proc/sys/net/ipv4/ip_local_port_range").split.first)
    rescue SystemCallError, ArgumentError
      @ephemeral_low = 32_768
    end

    def self.listen_port_range
      [10_000, [ephemeral_low - 1, 10_100].max]
    end

    # The port went to another process between free_port and the server's bind.
    class PortTaken < StandardError; end

    # cluster_node: a cluster node, whose bus port (--cluster-port) is chosen and moved with its port.
    def initialize(port: nil, unixsocket: false, extra_args: [], cluster_node: false)
      @host = HOST
      @port = port || self.class.free_port
      @bus_port = cluster_node ? other_free_port : nil
      # Until the first start, ports we chose may still be swapped for others.
      @port_movable = port.nil?
      @dir = Dir.mktmpdir("ferrolock-redis-")
      @unixsocket = unixsocket ? File.join(@dir, "redis.sock") : nil
      @extra_args = extra_args
      @pid = nil
      @owner = Process.pid
      at_exit { destroy if Process.pid == @owner }
    end

    def url(db: 0)
      "redis://#{host}:#{port}/#{db}"
    end

    # Path of the unix socket (when started with unixsocket: true).
    def socket_path
      @unixsocket or raise ArgumentError, "this server has no unix socket"
    end

    def start
      return self if running?

      args = ["redis-server", "--bind", host, "--dir", dir,
              "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]
      args += ["--unixsocket", @unixsocket, "--unixsocketperm", "700"] if @unixsocket
      args += @extra_args
      tries = 0
      begin
        @pid = Process.spawn(*args, *port_args, out: File.join(dir, "redis.log"), err: %i[child out], pgroup: true)
        wait_until_ready
      rescue PortTaken
        raise unless @port_movable && (tries += 1) < 5

        @port = self.class.free_port
        @bus_port &&= other_free_port
        FileUtils.rm_f(File.join(dir, CLUSTER_CONFIG)) # it names the ports given up
        retry
      end
      @port_movable = false
      self
    end

    def stop
      return unless @pid

      resume
      signal("TERM")
      unless wait_for_exit(5)
        signal("KILL")
        wait_for_exit(5)
      end
      @pid = nil
      close_redis
    end

    def restart
      stop
      start
    end

    def flushall
      redis.call("FLUSHALL")
      redis.call("SCRIPT", "FLUSH")
    end

    # A plain redis-rb client, for looking at what ferrolock wrote.
    def redis(db: 0)
      @redis ||= {}
      @redis[db] ||= Redis.new(host: host, port: port, db: db, timeout: 5)
    end

    def destroy
      stop
      FileUtils.rm_rf(dir)
    end

    private

    # --port, and a cluster node's bus port and state file.
    def port_args
      args = ["--port", port.to_s]
      return args unless @bus_port

      args + ["--cluster-enabled", "yes", "--cluster-port", @bus_port.to_s, "--cluster-config-file", CLUSTER_CONFIG]
    end

    # A free port that is not the server's own.
    def other_free_port
      loop do
        other = self.class.free_port
        return other unless other == @port
      end
    end

    def answering?
      FerrolockTest.redis_answering_as?(host, port, @pid)
    end

    def close_redis
      (@redis || {}).each_value(&:close)
      @redis = nil
    end

    def log_tail
      File.read(File.join(dir, "redis.log")).lines.last(5).join
    rescue Errno::ENOENT
      ""
    end
  end
end
