# frozen_string_literal: true

require "socket"

module FerrolockTest
  # A TCP relay on a free loopback port in front of a server, that the example can close: while
  # closed, it cuts every open connection and refuses new ones (accepts and closes at once), so a
  # client's request fails without reaching the server, as when a firewall blocks its port. Used to
  # make SQS unreachable for a while without losing moto's queues, and to move a Redis client to
  # another server.
  class TcpGate
    attr_reader :port

    def initialize(host, target_port)
      @host = host
      @target_port = target_port
      @open = true
      @lock = Mutex.new
      @sockets = []
      @threads = []
    end

    def start
      @server = TCPServer.new(@host, 0)
      @port = @server.addr[1]
      @acceptor = Thread.new { accept_loop }
      @acceptor.report_on_exception = false
      self
    end

    def endpoint
      "http://#{@host}:#{port}"
    end

    # Cuts every connection and refuses new ones until #open.
    def close
      @lock.synchronize do
        @open = false
        @sockets.each { |socket| close_quietly(socket) }
        @sockets.clear
      end
    end

    def open
      @lock.synchronize { @open = true }
    end

    # Relays to another port from now on, cutting the connections to the old one (a failover's new
    # primary behind the same address).
    def retarget(target_port)
      close
      @lock.synchronize do
        @target_port = target_port
        @open = true
      end
    end

    def stop
      close
      close_quietly(@server)
      @acceptor&.join(2)
      @threads.each { |thread| thread.join(2) || thread.kill }
    end

    private

    def accept_loop
      loop do
        client = @server.accept
        relay(client)
      end
    rescue IOError, SystemCallError
      nil
    end

    def relay(client)
      upstream = nil
      @lock.synchronize do
        return close_quietly(client) unless @open

        upstream = TCPSocket.new(@host, @target_port)
        @sockets.push(client, upstream)
      end
      @threads << pipe(client, upstream) << pipe(upstream, client)
      @threads.select!(&:alive?)
    rescue SystemCallError
      close_quietly(client)
    end

    # readpartial, not IO.copy_stream: Ruby wakes a thread blocked in readpartial when another
    # thread closes its socket (IOError), but not one inside copy_stream, which would then sleep on
    # a closed descriptor (or a new socket given the same number) until the example's time limit.
    def pipe(from, to)
      thread = Thread.new do
        loop { to.write(from.readpartial(65_536)) }
      rescue IOError, SystemCallError
        nil
      ensure
        close_quietly(from)
        close_quietly(to)
      end
      thread.report_on_exception = false
      thread
    end

    def close_quietly(socket)
      socket&.close
    rescue IOError, SystemCallError
      nil
    end
  end
end
