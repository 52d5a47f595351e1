# frozen_string_literal: true

# A tiny registry of demo scenarios. Each file in demo/scenarios/ declares one:
#
#   Demo.scenario("DistMutex: one holder at a time") do |report|
#     report.line("acquired after", "12.3 ms")
#     report.check("no overlap", overlaps.zero?)
#   end
module Demo
  Scenario = Struct.new(:title, :block)

  # What a scenario prints: labelled lines and pass/fail checks.
  class Report
    attr_reader :lines, :failures

    def initialize
      @lines = []
      @failures = []
    end

    def line(label, value = nil)
      @lines << (value.nil? ? label.to_s : format("%-34s %s", "#{label}:", value))
    end

    def check(label, ok, detail = nil)
      @failures << label unless ok
      line("#{ok ? "ok  " : "FAIL"} #{label}", detail)
    end

    def ms(seconds)
      format("%.2f ms", seconds * 1000.0)
    end
  end

  @scenarios = []

  class << self
    attr_reader :scenarios

    def scenario(title, &block)
      raise ArgumentError, "scenario #{title.inspect} needs a block" unless block

      @scenarios << Scenario.new(title, block)
    end

    # The Redis URL every scenario uses (set by demo/run.rb).
    attr_accessor :redis_url

    def client(**options)
      Ferrolock::Client.new(url: redis_url, **options)
    end

    def monotonic
      Ferrolock.monotonic
    end

    # Seconds from a write to a pipe until the process blocked reading it runs (the median of 5): what
    # this machine's load adds to any wake-up just now (a timing check's margin).
    def process_wake_up
      samples = Array.new(5) do
        ping_read, ping_write = IO.pipe
        pong_read, pong_write = IO.pipe
        pid = fork do
          ping_write.close
          ping_read.read(1)
          pong_write.write([monotonic].pack("G"))
          exit!(0)
        end
        sleep 0.05 # the child is blocked in read
        sent = monotonic
        ping_write.write("x")
        woke = pong_read.read(8).unpack1("G")
        Process.wait(pid)
        [ping_read, ping_write, pong_read, pong_write].each(&:close)
        woke - sent
      end
      samples.sort[2]
    end
  end
end
