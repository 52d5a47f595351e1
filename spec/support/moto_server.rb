# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"
require_relative "redis_server"
require_relative "server_process"

module FerrolockTest
  # A throwaway moto server (a real SQS-compatible server, `moto_server -H 127.0.0.1 -p PORT`) on a
  # free loopback port, stopped after (at exit too). moto lives in a virtualenv outside the repo
  # and /tmp, made on the host by bin/setup (bin/moto-venv). Inside the modern root (bin/modern),
  # the host's file system is at /host, so the host's moto runs there through `chroot /host`: the
  # root shares the host's network, and its loopback port is the same.
  class MotoServer
    include ServerProcess

    HOST = "127.0.0.1"
    NAME = "moto_server"
    VENV = ENV.fetch("FERROLOCK_MOTO_VENV", "/var/cache/ferrolock/moto-venv")
    BOOT_TIMEOUT = 30

    attr_reader :port, :pid

    # The command that starts moto_server, or nil when there is none.
    def self.command
      exe = File.join(VENV, "bin", "moto_server")
      return [exe] if File.executable?(exe)
      return ["chroot", "/host", exe] if File.executable?(File.join("/host", exe))

      nil
    end

    # Why moto cannot run here, or nil.
    def self.missing
      command ? nil : "no moto_server in #{VENV} (bin/setup makes it: bin/moto-venv)"
    end

    def initialize
      @port = nil
      @pid = nil
      @owner = Process.pid
      @log = nil
      at_exit { stop if Process.pid == @owner }
    end

    def endpoint
      "http://#{HOST}:#{port}"
    end

    # Starts moto on a free port (another one if the port was taken meanwhile).
    def start
      return self if running?

      command = self.class.command or raise self.class.missing
      tries = 0
      begin
        @port ||= RedisServer.free_port
        @log = Dir.mktmpdir("ferrolock-moto-")
        @pid = Process.spawn(*command, "-H", HOST, "-p", port.to_s, out: File.join(@log, "moto.log"),
                                                                    err: %i[child out], pgroup: true)
        wait_until_ready
      rescue PortTaken
        raise if (tries += 1) >= 5

        @port = nil
        retry
      end
      self
    end

    # Stops moto (its queues and messages are gone with it).
    def stop
      return unless @pid

      signal("TERM")
      signal("KILL") unless wait_for_exit(5)
      wait_for_exit(5)
      @pid = nil
      FileUtils.rm_rf(@log) if @log
      @log = nil
    end

    # Stops moto for `seconds` and starts a new one on the same port: every request meanwhile fails to
    # connect. moto keeps its state in memory, so this is for "SQS unreachable", not for "SQS restarted"
    # (use #pause for that).
    def restart
      stop
      start
    end

    class PortTaken < StandardError; end

    private

    # moto runs in its own process group (it may start children): signals go to the group.
    def signal_target
      -@pid
    end

    # moto answers GET /moto-api/ (its dashboard) once it serves.
    def answering?
      TCPSocket.open(HOST, port) do |socket|
        socket.write("GET /moto-api/data.json HTTP/1.0\r\nHost: #{HOST}\r\n\r\n")
        socket.gets.to_s.start_with?("HTTP/")
      end
    rescue SystemCallError, IOError
      false
    end

    def log_tail
      File.read(File.join(@log, "moto.log")).lines.last(5).join
    rescue Errno::ENOENT, TypeError
      ""
    end
  end
end
