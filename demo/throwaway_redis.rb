# frozen_string_literal: true

require "fileutils"
require "socket"
require "tmpdir"

module Demo
  # A redis-server on a free loopback port, persistence off, removed at exit.
  class ThrowawayRedis
    attr_reader :port

    def initialize
      server = TCPServer.new("127.0.0.1", 0)
      @port = server.addr[1]
      server.close
      @dir = Dir.mktmpdir("ferrolock-demo-")
    end

    def url
      "redis://127.0.0.1:#{port}/0"
    end

    def start
      @pid = Process.spawn("redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--dir", @dir,
                           "--save", "", "--appendonly", "no", "--loglevel", "warning",
                           out: File.join(@dir, "redis.log"), err: %i[child out])
      owner = Process.pid
      at_exit { stop if Process.pid == owner }
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

    def wait_until_ready
      200.times do
        return if pong?

        sleep 0.025
      end
      raise "redis-server did not start on port #{port}"
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
