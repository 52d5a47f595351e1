# frozen_string_literal: true

require "redis"
require_relative "support/testing_scenarios"
require_relative "support/unfair_run"

# ConcurrentLimiter.new(name, count, fair: false) (issue 43 item 4, ext/ferrolock-core/src/line/local/parked.rs):
# a releasing holder whose process has a thread waiting parks its slot for the next thread of the
# process that asks (no Redis round trip, nobody woken), and the process keeps the slot among its
# threads for up to cohort::UNFAIR_SLICE (50 ms) in a row; then it goes back through Redis. Every
# block below counts the blocks inside in the test Redis and logs "process|ms waited", the wait
# measured with Redis' clock (TIME).
RSpec.describe "ConcurrentLimiter fair: false" do
  let(:server) { FerrolockTest.redis_server }
  let(:redis) { server.redis }
  let(:limit) { 3 }
  let(:slice) { 0.05 } # cohort::UNFAIR_SLICE
  let(:window) { 0.01 } # cohort::WINDOW

  include FerrolockTest::UnfairRun

  # One thread: blocks until the key "stop" exists; the blocks it ran.
  def worker(client, process, fair)
    raw = Redis.new(url: server.url)
    limiter = Ferrolock::ConcurrentLimiter.new("shared", limit, wait_timeout: 30, lease: 5, client: client, fair: fair)
    done = 0
    until raw.exists?("stop")
      asked = redis_ms(raw)
      limiter.within_limit do
        log_entry(raw, process, redis_ms(raw) - asked)
        raw.incr("ran")
        raw.decr("inside")
      end
      done += 1
    end
    done
  end

  def run_processes(fair:)
    super(fair: fair, namespace: "ul", threads: 5, also_clear: ["ran"])
  end

  it "never lets more than count in, runs every block and serves the other process within the bound",
     time_limit: 150 do
    fair = run_processes(fair: true)
    log = run_processes(fair: false)

    expect(redis.get("max").to_i).to be_between(1, limit)
    expect(redis.get("ran").to_i).to eq(log.size)
    expect(redis.get("done").to_i).to eq(log.size)
    expect(log.map(&:first).uniq.sort).to eq([0.0, 1.0])
    # A waiter of the other process is passed over at most a slice (+ one cohort) per slot its
    # turn waits behind, twice when its own process's slice ended first; the rest is the
    # queueing and noise the fair run measured.
    unfair_max = log.map(&:last).max / 1000.0
    # The margin: the longest wait of the same load in fair mode, on this machine, before and after.
    fair_max = longest_fair_wait(fair, run_processes(fair: true))
    bound = (2 * limit * (slice + window)) + (2 * fair_max)
    puts "\n  blocks fair #{fair.size}, unfair #{log.size}; longest wait fair #{(fair_max * 1000).round(1)} ms, " \
         "unfair #{(unfair_max * 1000).round(1)} ms (bound #{(bound * 1000).round(1)} ms)"
    expect(unfair_max).to be <= bound
    wait_until(timeout: 10) { redis.zcard("ul:{shared}:slots").zero? }
  end

  it "gives back the slots of a process killed with kill -9 while its threads park them", time_limit: 60 do
    reader, writer = IO.pipe
    pid = fork_child do
      reader.close
      client = Ferrolock::Client.new(url: server.url, namespace: "ul")
      limiter = Ferrolock::ConcurrentLimiter.new("killed", limit, lease: 1, wait_timeout: 30, client: client,
                                                                  fair: false)
      blocks = Queue.new
      # More threads than slots, each releasing and asking again at once: slots are parked and
      # retaken all the time.
      Array.new(limit + 2) { Thread.new { loop { limiter.within_limit { blocks << 1 } } } }
      Thread.pass until blocks.size > 200
      writer.puts "busy"
      sleep
    end
    writer.close
    expect(reader.gets).to eq("busy\n")
    Process.kill(:KILL, pid)
    Process.wait(pid)
    # Nothing it held, in a thread or parked, outlives its last renewal by more than the lease
    # (scores are expiries in Redis ms; the member scored negative is the limit's record).
    expiries = redis.zrangebyscore("ul:{killed}:slots", 0, "+inf")
                    .map { |m| redis.zscore("ul:{killed}:slots", m) }
    expect(expiries.size).to be <= limit
    expect((expiries.max || 0) - redis_ms(redis)).to be <= 1000
    client = Ferrolock::Client.new(url: server.url, namespace: "ul")
    limiter = Ferrolock::ConcurrentLimiter.new("killed", limit, lease: 1, wait_timeout: 10, client: client)
    started = monotonic
    # Every slot comes back: `limit` blocks inside at once.
    inside = Queue.new
    threads = Array.new(limit) do
      Thread.new do
        limiter.within_limit do
          inside << 1
          Thread.pass until inside.size == limit
        end
      end
    end
    threads.each(&:join)
    expect(monotonic - started).to be < 10
    expect(inside.size).to eq(limit)
  ensure
    reader&.close
  end

  it "names fair: when it is not true or false" do
    expect { Ferrolock::ConcurrentLimiter.new("x", 2, fair: "no") }
      .to raise_error(TypeError, /fair must be true or false/)
    expect { Ferrolock::ConcurrentLimiter.new("x", 2, fair: nil) }.to raise_error(TypeError, /fair/)
  end

  it "is taken by the testing mode's fake and disabled backends" do
    %i[fake disabled].each do |mode|
      ran = nil
      example = Object.new
      example.define_singleton_method(:run) do
        ran = Ferrolock::ConcurrentLimiter.new("t", 2, fair: false).within_limit { mode }
      end
      FerrolockTest::TestingModes.around(example, mode)
      expect(ran).to eq(mode)
    end
  end
end
