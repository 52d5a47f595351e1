# frozen_string_literal: true

require "json"
require "rbconfig"

module Chaos
  # The worker processes of a run: spawns them, finds one that holds something (by reading the
  # new lines of its journal), kill -9s it and starts a replacement with the same deadline.
  class WorkerPool
    Member = Struct.new(:pid, :journal, :offset, :open)

    attr_reader :journals, :failed

    # env: extra environment for the worker processes.
    def initialize(dir:, url:, deadline:, threads:, env: {})
      @env = env
      @dir = dir
      @url = url
      @deadline = deadline
      @threads = threads
      @members = []
      @journals = []
      @failed = [] # workers that exited with an error (not the ones killed on purpose)
    end

    def spawn_workers(count)
      count.times { spawn_one }
    end

    # kill -9 of the worker holding the most sections now; returns [pid, held sections] with
    # held = [[prim, name], ...] as its journal shows them just before the kill.
    def kill_a_holder
      member = @members.max_by { |m| refresh(m).size }
      held = refresh(member).values
      Process.kill("KILL", member.pid)
      killed_at = Chaos.now
      Process.wait(member.pid)
      @members.delete(member)
      spawn_one
      [member.pid, held, killed_at]
    end

    # Waits for every worker to finish its last section; a worker that hangs past grace
    # seconds is killed and reported.
    def wait_all(grace:)
      limit = Chaos.now + grace
      hung = []
      @members.each do |member|
        next if exited?(member.pid, limit)

        hung << member.pid
        Process.kill("KILL", member.pid)
        Process.wait(member.pid)
      end
      hung
    end

    private

    def exited?(pid, limit)
      loop do
        _, status = Process.wait2(pid, Process::WNOHANG)
        if status
          @failed << pid unless status.success?
          return true
        end
        return false if Chaos.now > limit

        sleep 0.1
      end
    end

    def spawn_one
      journal = File.join(@dir, "worker-#{@journals.size}.jsonl")
      worker = File.expand_path("worker.rb", __dir__)
      lib = File.expand_path("../lib", __dir__)
      pid = Process.spawn(@env, RbConfig.ruby, "-I", lib, worker, @url, journal, @deadline.to_s, @threads,
                          out: File.join(@dir, "worker-#{@journals.size}.log"), err: %i[child out])
      @journals << journal
      @members << Member.new(pid, journal, 0, {})
    end

    # The member's open sections ({id => [prim, name]}), updated from its journal's new lines.
    def refresh(member)
      return member.open unless File.exist?(member.journal)

      File.open(member.journal) do |file|
        file.seek(member.offset)
        file.each_line do |line|
          break unless line.end_with?("\n")

          member.offset += line.bytesize
          track(member.open, JSON.parse(line, symbolize_names: true))
        end
      end
      member.open
    end

    def track(open, record)
      case record[:ev]
      when "start" then open[record[:id]] = [record[:prim], record[:name]]
      when "end" then open.delete(record[:id])
      end
    end
  end
end
