# frozen_string_literal: true

require "io/wait"
require "socket"

module FerrolockTest
  # Whether the Redis answering at host:port is process `pid` (INFO's process_id). Another suite's
  # server can take a port between our free_port and our server's bind: its answers must not pass
  # for ours. With password:, it AUTHs first (a sentinel's requirepass).
  def self.redis_answering_as?(host, port, pid, password: nil)
    TCPSocket.open(host, port) do |socket|
      command = ->(*args) { socket.write("*#{args.size}\r\n#{args.map { |a| "$#{a.bytesize}\r\n#{a}\r\n" }.join}") }
      reply = -> { socket.wait_readable(1) && socket.gets }
      command.call("AUTH", password) if password
      return false if password && reply.call != "+OK\r\n"

      command.call("INFO", "server")
      size = reply.call
      return false unless size&.start_with?("$")

      socket.read(Integer(size[1..]) + 2)[/^process_id:(\d+)\r$/, 1] == pid.to_s
    end
  rescue SystemCallError, IOError, ArgumentError
    false
  end

  # What the test servers (RedisServer, MotoServer) share about their process: signals, waiting for it to
  # answer or to exit. The including class has @pid, #port, #answering?, #log_tail, NAME, BOOT_TIMEOUT
  # and PortTaken; #signal_target is the pid (a server whose children must get the signal too says -@pid).
  module ServerProcess
    def running?
      !@pid.nil?
    end

    # SIGSTOP: the server keeps its sockets open and answers nothing until #resume.
    def pause
      signal("STOP")
    end

    def resume
      signal("CONT")
    end

    private

    def signal_target
      @pid
    end

    def signal(name)
      Process.kill(name, signal_target) if @pid
      true
    rescue Errno::ESRCH
      false
    end

    def wait_for_exit(seconds)
      deadline = now + seconds
      while now < deadline
        return true if Process.waitpid(@pid, Process::WNOHANG)

        sleep 0.01
      end
      false
    rescue Errno::ECHILD
      true
    end

    # Until the server answers; PortTaken when another process bound its port first.
    def wait_until_ready
      name = self.class::NAME
      deadline = now + self.class::BOOT_TIMEOUT
      until answering?
        if Process.waitpid(@pid, Process::WNOHANG)
          @pid = nil
          raise self.class::PortTaken, log_tail if log_tail.include?("Address already in use")

          raise "#{name} on port #{port} exited: #{log_tail}"
        end
        raise "#{name} on port #{port} did not start within #{self.class::BOOT_TIMEOUT}s: #{log_tail}" if now > deadline

        sleep 0.02
      end
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
