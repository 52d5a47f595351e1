# frozen_string_literal: true

require "fileutils"
require "socket"
require "tmpdir"

module Demo
  # A redis-server on a free loopback port in its own temp dir (persistence off unless extra_args
  # say otherwise), removed at exit. Used by bin/demo, bin/bench and bin/chaos.
  class ThrowawayRedis
    attr_reader :port, :dir

    def initialize(extra_args: ["--appendonly", "no"], prefix: "ferrolock-demo-")
      server = TCPServer.new("127.0.0.1", 0)
      @port = server.addr[1]
      server.close
      @dir = Dir.mktmpdir(prefix)
      @extra_args = extra_args
    end

    def url
      "redis://127.0.0.1:#{port}/0"
    end

    def start
      @pid = Process.spawn("redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--dir", @dir,
                           "--save", "", *@extra_args, "--loglevel", "warning",
                           out: File.join(@dir, "redis.log"), err: %i[child out])
      stop_at_exit
      wait_until_ready
      self
    end

    def stop
      return unless @pid

      Process.kill("TERM", @pid)
      Process.wait(@pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    ensure
      @pid = nil
      FileUtils.rm_rf(@dir)
    end

    private

    def stop_at_exit
      return if @stop_at_exit

      @stop_at_exit = true
      owner = Process.pid
      at_exit { stop if Process.pid == owner }
    end

    def wait_until_ready
      400.times do
        return if pong?

        sleep 0.025
      end
      raise "redis-server did not start on port #{port} (see #{@dir}/redis.log)"
    end

    def pong?
      TCPSocket.open("127.0.0.1", port) do |socket|
        socket.write("PING\r\n")
        socket.gets == "+PONG\r\n"
      end
    rescue SystemCallError
      false
    end
  end
end
