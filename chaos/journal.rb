# frozen_string_literal: true

require "json"

# bin/chaos: a fault suite for ferrolock's promises (see chaos/run.rb).
module Chaos
  # One clock for every process of a run: CLOCK_MONOTONIC is system-wide on Linux, so times
  # written by different worker processes and by the runner compare directly.
  def self.now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # Appends one JSON object per line to a worker's history file. Each line is written with a
  # single write(2) on an unbuffered file, so a kill -9 loses at most the line being built,
  # never half of one.
  class Journal
    def initialize(path)
      @file = File.open(path, "a")
      @file.sync = true
      @lock = Mutex.new
    end

    def write(record)
      line = "#{JSON.generate(record)}\n"
      @lock.synchronize { @file.write(line) }
    end

    def close
      @lock.synchronize { @file.close }
    end

    # Every record of a history file (a torn last line, left by kill -9, is skipped).
    def self.read(path)
      File.foreach(path).filter_map do |line|
        JSON.parse(line, symbolize_names: true)
      rescue JSON::ParserError
        nil
      end
    end
  end
end
