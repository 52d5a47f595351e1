# frozen_string_literal: true

require "open3"
require "redis"

module Bench
  # Pins like a deployment where Redis has a core of its own: every redis-server on the first CPU this
  # process may use, this process (every thread, and so every child it forks or spawns later) on the
  # others (`taskset`). Unpinned, with the reason, where there is one CPU or no taskset.
  module Pinning
    module_function

    # Pins this process to the client CPUs; returns a line saying how the run is pinned.
    def start
      cpus = allowed_cpus
      return @status = "unpinned: #{cpus.is_a?(String) ? cpus : "only CPU #{cpus.first} is available"}" \
        if cpus.is_a?(String) || cpus.size < 2

      @server_cpu = cpus.first
      @client_cpus = cpus.drop(1).join(",")
      taskset("-a", "-p", "-c", @client_cpus, Process.pid.to_s)
      @status = "pinned: redis-server on CPU #{@server_cpu}, every client process on CPU #{@client_cpus} (taskset)"
    end

    def status
      @status or raise "Bench::Pinning.start first"
    end

    # Moves the redis-server answering at url (every thread of it) to the server CPU.
    def server(url)
      return unless @server_cpu

      taskset("-a", "-p", "-c", @server_cpu.to_s, server_pid(url).to_s)
    end

    # Undoes start and server(url) (for a benchmark run among others by bin/bench): this process and
    # that redis-server may use every CPU they could before.
    def stop(url)
      return unless @server_cpu

      cpus = "#{@server_cpu},#{@client_cpus}"
      taskset("-a", "-p", "-c", cpus, Process.pid.to_s)
      taskset("-a", "-p", "-c", cpus, server_pid(url).to_s)
      @server_cpu = nil
    end

    def server_pid(url)
      redis = Redis.new(url: url)
      redis.info("server").fetch("process_id")
    ensure
      redis&.close
    end

    # The CPUs this process may run on, or why that is unknown.
    def allowed_cpus
      out, status = Open3.capture2e("taskset", "-c", "-p", Process.pid.to_s)
      return "taskset failed: #{out.strip}" unless status.success?

      out[/list:\s*(\S+)/, 1].split(",").flat_map do |part|
        first, last = part.split("-").map { |n| Integer(n) }
        (first..(last || first)).to_a
      end
    rescue Errno::ENOENT
      "taskset not found"
    end

    def taskset(*args)
      out, status = Open3.capture2e("taskset", *args)
      raise "taskset #{args.join(" ")} failed: #{out.strip}" unless status.success?
    end
  end
end
