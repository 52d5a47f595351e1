# frozen_string_literal: true

require "json"
require "socket"
require "timeout"
require_relative "support/redis_monitor"

RSpec.describe Ferrolock::RateLimiter do
  let(:redis) { FerrolockTest.redis_server.redis }

  # The OverLimit a call raises (nil if it went ahead).
  def refusal(limiter)
    limiter.within_limit { nil }
    nil
  rescue Ferrolock::OverLimit => e
    e
  end

  def redis_time
    seconds, micros = redis.time
    seconds + (micros / 1e6)
  end

  describe "#within_limit" do
    it "returns the block's value; status counts down and says when the limiter is full again" do
      limiter = described_class.window("basic", 3, 60)
      expect(limiter.status).to eq(remaining: 3, reset_in: 0, limit: 3, interval: 60.0)
      expect(limiter.within_limit { :value }).to eq(:value)
      status = limiter.status
      expect(status).to include(remaining: 2, limit: 3, interval: 60.0)
      expect(status[:reset_in]).to be_between(0, 60)
    end

    it "uses up a slot even when the block raises (the call was made), and keeps the block's exception" do
      limiter = described_class.bucket("raises", 2, 60)
      expect { limiter.within_limit { raise "boom" } }.to raise_error(RuntimeError, "boom")
      expect(limiter.status[:remaining]).to eq(1)
    end

    it "raises OverLimit with the limiter and retry_after at once when the next slot is past wait_timeout" do
      limiter = described_class.window("slow", 1, 3600, wait_timeout: 2)
      limiter.within_limit { nil }
      error = nil
      took = elapsed { error = refusal(limiter) }
      expect(error).to be_a(Ferrolock::OverLimit)
      expect(error.limiter).to be(limiter)
      # The fixed window ends at the next whole hour of Redis time.
      expect(error.retry_after).to be_within(2).of(3600 - (redis_time % 3600))
      # No slot could open within 2 s: refused without waiting for wait_timeout.
      expect(took).to be < 1.5
    end

    it "waits until the slot the script names (not before it, never past wait_timeout)" do
      limiter = described_class.leaky("paced", 1, 1, wait_timeout: 3)
      first = redis_time
      limiter.within_limit { nil }
      took = elapsed { limiter.within_limit { nil } }
      # The second call is one emission interval (1 s) after the first, by Redis' clock.
      expect(redis_time - first).to be >= 1.0
      expect(took).to be_between(0.5, 2.5)
      # wait_timeout: 0 never waits.
      took, late = elapsed_and_lateness do
        expect { limiter.within_limit(wait_timeout: 0) { nil } }.to raise_error(Ferrolock::OverLimit)
      end
      expect(took).to be < late_bound(0.5, late)
    end

    it "ends a wait promptly on Thread#raise / Timeout, without taking a slot" do
      limiter = described_class.leaky("interrupted", 1, 30, wait_timeout: 60)
      limiter.within_limit { nil }
      ran = false
      took = elapsed do
        expect { Timeout.timeout(0.3) { limiter.within_limit { ran = true } } }.to raise_error(Timeout::Error)
      end
      expect(took).to be < 2
      expect(ran).to be(false)
      expect(limiter.status[:remaining]).to eq(0)
    end

    it "counts in Redis time: a local clock jumping a day ahead changes nothing" do
      limiter = described_class.window("clock", 2, 3600, wait_timeout: 0)
      events = []
      sub = Ferrolock.subscribe(:acquired) { |_, payload| events << payload }
      limiter.within_limit { nil }
      tomorrow = Time.now + 86_400
      allow(Time).to receive(:now).and_return(tomorrow)
      real = Process.method(:clock_gettime)
      allow(Process).to receive(:clock_gettime) do |clock, *rest|
        clock == Process::CLOCK_REALTIME ? tomorrow.to_f : real.call(clock, *rest)
      end
      limiter.within_limit { nil }
      expect { limiter.within_limit { nil } }.to raise_error(Ferrolock::OverLimit)
      Ferrolock.unsubscribe(sub)
      expect(events.map { |e| e[:granted_at] }).to all(be_within(5).of(redis_time))
    end
  end

  describe "bursts" do
    it "bucket: lets `count` through at once, then one per interval / count" do
      limiter = described_class.bucket("burst", 10, 1, wait_timeout: 0)
      10.times { limiter.within_limit { nil } }
      error = refusal(limiter)
      expect(error).to be_a(Ferrolock::OverLimit)
      expect(error.retry_after).to be_between(0.001, 0.1)
    end

    it "leaky: spaces calls evenly (no burst), or lets `burst` extra through at once" do
      even = described_class.leaky("even", 10, 1, wait_timeout: 0)
      even.within_limit { nil }
      expect(refusal(even).retry_after).to be <= 0.1
      bursty = described_class.leaky("bursty", 10, 1, burst: 2, wait_timeout: 0)
      3.times { bursty.within_limit { nil } }
      expect { bursty.within_limit { nil } }.to raise_error(Ferrolock::OverLimit)
    end

    it "sliding window: refuses until the oldest counted call is an interval old" do
      limiter = described_class.window("log", 2, 60, sliding: true, wait_timeout: 0)
      2.times { limiter.within_limit { nil } }
      expect(refusal(limiter).retry_after).to be_within(2).of(60)
    end
  end

  # 2 processes x 8 threads per limiter, all five kinds at once for RUN seconds. Each granted call
  # records its slot (the :acquired event's granted_at: the Redis time its script counted it
  # at), the Redis time read inside the block and its cost. Every wait is a reservation: with
  # 16 callers queued at 20 calls (or 40 points) per second, no slot is 5 s away, so no call
  # may be refused.
  describe "accuracy under 2 processes x 8 threads" do
    run_for = 6
    limiters = {
      "window" => "Ferrolock::RateLimiter.window('acc-window', 10, 0.5, wait_timeout: 5)",
      "sliding" => "Ferrolock::RateLimiter.window('acc-sliding', 10, 0.5, sliding: true, wait_timeout: 5)",
      "bucket" => "Ferrolock::RateLimiter.bucket('acc-bucket', 10, 0.5, wait_timeout: 5)",
      "leaky" => "Ferrolock::RateLimiter.leaky('acc-leaky', 20, 1, wait_timeout: 5)",
      "points" => "Ferrolock::RateLimiter.points('acc-points', 20, 0.5, wait_timeout: 5)"
    }

    before(:all) do
      code = <<~RUBY
        require "ferrolock"
        require "json"
        Ferrolock.subscribe(:acquired) { |_, payload| Thread.current[:granted_at] = payload[:granted_at] }
        limiters = { #{limiters.map { |kind, make| "#{kind.dump} => #{make}" }.join(", ")} }
        client = Ferrolock.client
        stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + #{run_for}
        calls = limiters.flat_map do |kind, limiter|
          Array.new(8) do
            Thread.new do
              mine = []
              while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop
                cost = kind == "points" ? rand(1..4) : 1
                begin
                  limiter.within_limit(cost) do
                    seconds, micros = client.call("TIME")
                    mine << [kind, Thread.current[:granted_at], seconds.to_i + micros.to_i / 1e6, cost]
                  end
                rescue Ferrolock::OverLimit
                  mine << [kind, nil, nil, cost]
                end
              end
              mine
            end
          end
        end.flat_map(&:value)
        puts JSON.generate(calls)
      RUBY
      runs = Array.new(2) { Thread.new { run_ruby!(code, timeout: 60) } }
      @calls = runs.flat_map { |r| JSON.parse(r.value) }.group_by(&:first)
    end

    def granted(kind)
      @calls.fetch(kind).filter_map { |_, at, _| at }.sort
    end

    # [slot, cost] of each call, by slot.
    def spends(kind)
      @calls.fetch(kind).filter_map { |_, at, _, cost| [at, cost] if at }.sort
    end

    # Calls per second between the first and last grant, not counting the first `burst` (which
    # may all go at the first instant): at most the configured rate by construction.
    def rate(kind, burst)
      times = granted(kind)
      observed = (times.size - burst) / (times.last - times.first)
      warn "rate_limiter_spec: #{kind} #{observed.round(2)} calls/s observed" if ENV["FERROLOCK_SHOW_RATES"]
      observed
    end

    it "every call got a slot (none refused) and ran no earlier than it, by Redis' clock" do
      expect(@calls.keys.sort).to eq(%w[bucket leaky points sliding window])
      @calls.each_value do |calls|
        expect(calls.size).to be > 50
        expect(calls.count { |_, at, _| at.nil? }).to eq(0)
        expect(calls).to all(satisfy { |_, at, inside| at.nil? || inside >= at - 1e-6 })
      end
    end

    it "window: at most 10 calls in each 0.5 s window of Redis time, about 10 in each full one" do
      per_window = granted("window").group_by { |at| (at / 0.5).floor }.transform_values(&:size)
      expect(per_window.values.max).to eq(10)
      full = per_window.keys.sort[1..-2].map { |w| per_window[w] }
      expect(full.sum.fdiv(full.size * 10)).to be >= 0.95
    end

    # A freed slot is taken a wake-up later (a few ms; tens on a loaded VM), and the log then
    # shifts by that much each interval: the sliding window and leaky run a little below the rate.
    it "sliding window: at most 10 calls in ANY 0.5 s span, rate close to 20/s" do
      times = granted("sliding")
      spans = times.each_cons(11).map { |first, *, last| last - first }
      expect(spans.min).to be >= 0.5 - 2e-6
      expect(rate("sliding", 10)).to be_between(20 * 0.85, 20 * 1.01)
    end

    it "bucket: never more than 10 + 20/s x elapsed in any span, refill rate within a few % of 20/s" do
      times = granted("bucket")
      times.each_with_index do |first, i|
        times[i..].each_with_index do |last, n|
          expect(n + 1).to be <= 10 + ((last - first) * 20) + 1e-3
        end
      end
      expect(rate("bucket", 10)).to be_between(20 * 0.93, 20 * 1.01)
    end

    # Reserved slots are counted at their slot, not at the waiter's wake-up: leaky keeps the
    # full rate even with no burst.
    it "leaky: calls at least 50 ms apart (evenly spaced), rate within a few % of 20/s" do
      times = granted("leaky")
      gaps = times.each_cons(2).map { |a, b| b - a }
      expect(gaps.min).to be >= 0.05 - 2e-6
      expect(rate("leaky", 1)).to be_between(20 * 0.95, 20 * 1.01)
    end

    it "points: never more than 20 + 40/s x elapsed points spent in any span, about 40 points/s" do
      spent = spends("points")
      spent.each_with_index do |(first, _), i|
        total = 0
        spent[i..].each do |last, cost|
          total += cost
          expect(total).to be <= 20 + ((last - first) * 40) + 1e-3
        end
      end
      observed = (spent.sum { |_, cost| cost } - 20) / (spent.last[0] - spent.first[0])
      expect(observed).to be_between(40 * 0.9, 40 * 1.01)
    end
  end

  # Waiting is a reservation made by the script that found the limiter full: slots go to
  # callers in the order their scripts ran, and a reserved caller never tries again.
  describe "fair waiting" do
    # `callers` threads in a chain: thread i enters within_limit `apart` seconds after thread
    # i - 1's script ran (seen through MONITOR), so entry order is script order however busy the
    # machine. `twin` (same kind, another name) caches the script first, so each call is one
    # EVALSHA. Returns, in entry order, { slot: granted_at or nil, error: OverLimit or nil,
    # took: }, once it has checked that each caller's script ran once: a reserved caller never
    # tries again.
    def queue_up(limiter, twin, callers:, apart:, wait_timeout:)
      twin.within_limit { nil }
      entries = []
      slots = {}
      sub = Ferrolock.subscribe(:acquired) { |_, payload| slots[Thread.current] = payload[:granted_at] }
      scripts = scripts_on(limiter.key) do |ran|
        threads = Array.new(callers) do |i|
          sleep apart
          entries << (entry = { at: Ferrolock.monotonic })
          thread = Thread.new do
            entry[:error] = refusal_within(limiter, wait_timeout)
            entry[:took] = Ferrolock.monotonic - entry[:at]
            entry[:slot] = slots[Thread.current]
          end
          wait_until(timeout: 10, what: "caller #{i}'s script") { ran.call > i }
          thread
        end
        threads.each(&:join)
      end
      expect(scripts).to eq(callers)
      entries
    ensure
      Ferrolock.unsubscribe(sub) if sub
    end

    # Yields a lambda counting the scripts (EVALSHA or EVAL, not the commands they run) MONITOR
    # has seen on `key` so far; returns the count once the block is done.
    def scripts_on(key)
      script = ->(line) { line.include?(key) && line.match?(/\] "eval(sha)?" /i) }
      FerrolockTest::RedisMonitor.watch(FerrolockTest.redis_server.url) do |monitor|
        count = 0
        yield(-> { count += monitor.lines_so_far.count(&script) })
        count + monitor.lines_until_now.count(&script)
      end
    end

    def quiet_thread(&block)
      Thread.new do
        Thread.current.report_on_exception = false
        block.call
      end
    end

    def refusal_within(limiter, wait_timeout)
      limiter.within_limit(wait_timeout: wait_timeout) { nil }
      nil
    rescue Ferrolock::OverLimit => e
      e
    end

    it "leaky 10/s: 20 callers arriving 5 ms apart get slots in arrival order, 100 ms apart, none refused" do
      limiter = described_class.leaky("fifo", 10, 1)
      entries = queue_up(limiter, described_class.leaky("fifo-twin", 10, 1), callers: 20, apart: 0.005, wait_timeout: 5)
      expect(entries.map { |e| e[:error] }).to all(be_nil)
      slots = entries.map { |e| e[:slot] }
      expect(slots.each_cons(2).map { |a, b| b - a }.min).to be >= 0.1 - 2e-6
      # Each caller entered after the one before had its reservation: its slot is later.
      # Polling waiters racing for each freed slot would come out in any order (and queue_up
      # would count their retries).
      expect(slots).to eq(slots.sort)
    end

    it "window: callers queue into later windows, in order; a slot past wait_timeout is refused at once" do
      limiter = described_class.window("queue", 3, 0.5)
      entries = queue_up(limiter, described_class.window("queue-twin", 3, 0.5), callers: 24, apart: 0.01,
                                                                                wait_timeout: 1.4)
      granted, refused = entries.partition { |e| e[:error].nil? }
      # Waits of up to 1.4 s reach 2 or 3 windows past the current one: 3 calls in each (more
      # if a loaded machine spreads the entries over more windows).
      expect(granted.size).to be >= 6
      expect(granted.map { |e| (e[:slot] / 0.5).floor }.tally.values.max).to eq(3)
      expect(refused.size).to be >= 3
      # Every refused caller's next window was past its wait, and it did not wait for it.
      refused.each do |e|
        expect(e[:error].retry_after).to be > 1.4 - 0.01
        expect(e[:took]).to be < 1.0
      end
      # Each caller entered after the one before had its reservation: its window is no earlier.
      slots = granted.map { |e| e[:slot] }
      expect(slots).to eq(slots.sort)
    end

    # The refund: only while no later call was counted (gcra, window), any time (sliding).
    it "a waiter interrupted in its wait gives its reserved slot back when that is safe" do
      leaky = described_class.leaky("refund", 1, 30, wait_timeout: 100)
      leaky.within_limit { nil }
      expect { Timeout.timeout(0.2) { leaky.within_limit { nil } } }.to raise_error(Timeout::Error)
      # Its slot (30 s on) is free again: the limiter is full for 30 s, not 60.
      wait_until(timeout: 5) { leaky.status[:reset_in] < 31 }
      # Two waiters: the first one's slot cannot come back (a later one was reserved after it).
      first = Thread.new { leaky.within_limit { nil } }
      wait_until(timeout: 5) { leaky.status[:reset_in] > 55 }
      second = Thread.new { leaky.within_limit { nil } }
      wait_until(timeout: 5) { leaky.status[:reset_in] > 85 }
      first.kill.join
      sleep 0.3 # a refund would have landed by now (it is sent at once)
      expect(leaky.status[:reset_in]).to be > 85
      # The latest waiter's slot does come back.
      second.kill.join
      wait_until(timeout: 5) { leaky.status[:reset_in].between?(50, 61) }

      sliding = described_class.window("refund", 1, 30, sliding: true, wait_timeout: 100)
      sliding.within_limit { nil }
      waiters = Array.new(2) { |i| quiet_thread { Timeout.timeout(0.3 + (i * 0.3)) { sliding.within_limit { nil } } } }
      waiters.each { |t| expect { t.join }.to raise_error(Timeout::Error) }
      wait_until(timeout: 5) { redis.zcard(sliding.key) == 1 }
      expect { sliding.within_limit(wait_timeout: 0) { nil } }.to raise_error(Ferrolock::OverLimit) do |e|
        expect(e.retry_after).to be_within(2).of(30)
      end
    end
  end

  describe ".points" do
    it "spends each call's cost from a budget of `points` per interval, refilled continuously" do
      limiter = described_class.points("budget", 10, 1, wait_timeout: 0)
      expect(limiter.within_limit(7) { :spent }).to eq(:spent)
      expect(limiter.status[:remaining]).to eq(3)
      error = nil
      expect { limiter.within_limit(4) { nil } }.to raise_error(Ferrolock::OverLimit) { |e| error = e }
      # One point more comes back 0.1 s after the call.
      expect(error.retry_after).to be_between(0.001, 0.1)
      limiter.within_limit(3) { nil }
      expect { limiter.within_limit { nil } }.to raise_error(Ferrolock::OverLimit)
      # Waiting reserves the points: 5 points come back in 0.5 s.
      took = elapsed { limiter.within_limit(5, wait_timeout: 2) { nil } }
      expect(took).to be_between(0.3, 1.5)
      expect(limiter.key).to eq("ferrolock:{rate:budget}:points")
    end

    it "rejects a cost above the budget, and any cost on the other kinds, naming cost" do
      points = described_class.points("budget", 10, 1)
      expect { points.within_limit(11) { nil } }.to raise_error(ArgumentError, /cost/)
      expect { points.within_limit(0) { nil } }.to raise_error(ArgumentError, /cost/)
      expect { points.within_limit(1.5) { nil } }.to raise_error(TypeError, /cost/)
      expect { described_class.bucket("x", 10, 1).within_limit(2) { nil } }.to raise_error(ArgumentError, /cost/)
      expect { described_class.points("x", 0, 1) }.to raise_error(ArgumentError, /count|points/)
    end
  end

  describe "Redis keys" do
    it "uses one hash-tagged key per limiter, whose TTL runs out once the limiter is idle" do
      limiters = [described_class.window("idle", 2, 0.4), described_class.window("idle", 2, 0.4, sliding: true),
                  described_class.bucket("idle", 2, 0.4), described_class.leaky("idle", 2, 0.4),
                  described_class.points("idle", 2, 0.4)]
      # The fixed window's key lives until its window ends, and windows start at multiples of 0.4 s of
      # Redis' clock: begin early in one, or its TTL may run out between the calls and the reads below.
      wait_until(timeout: 2, interval: 0.005) { redis.time.then { |s, us| ((s * 1_000_000) + us) % 400_000 < 100_000 } }
      limiters.each { |l| l.within_limit(wait_timeout: 0) { nil } }
      keys = redis.keys("*").sort
      expect(keys).to eq(%w[bucket log points tat window].map { |part| "ferrolock:{rate:idle}:#{part}" })
      expect(keys.map { |k| redis.pttl(k) }).to all(be_between(1, 400))
      expect(limiters.map(&:key).sort).to eq(keys)
      wait_until(timeout: 5) { redis.dbsize.zero? }
      expect(limiters.map { |l| l.status[:remaining] }).to eq([2, 2, 2, 1, 2])
    end

    it "a reserved slot's key lives until about one interval after that slot, then goes" do
      limiter = described_class.leaky("reserved", 2, 0.4, wait_timeout: 2)
      limiter.within_limit { nil }
      waiter = Thread.new { limiter.within_limit { nil } }
      wait_until(timeout: 2) { redis.pttl(limiter.key) > 250 }
      waiter.join
      wait_until(timeout: 5) { redis.dbsize.zero? }
    end
  end

  describe "bad input" do
    it "raises ArgumentError/TypeError naming the argument" do
      expect { described_class.window("", 1, 1) }.to raise_error(ArgumentError, /name/)
      expect { described_class.window(nil, 1, 1) }.to raise_error(TypeError, /name/)
      expect { described_class.window("a{b}", 1, 1) }.to raise_error(ArgumentError, /name/)
      expect { described_class.bucket("x", 0, 1) }.to raise_error(ArgumentError, /count/)
      expect { described_class.bucket("x", 1.5, 1) }.to raise_error(TypeError, /count/)
      expect { described_class.bucket("x", "3", 1) }.to raise_error(TypeError, /count/)
      expect { described_class.leaky("x", 1, 0) }.to raise_error(ArgumentError, /interval/)
      expect { described_class.leaky("x", 1, -1) }.to raise_error(ArgumentError, /interval/)
      expect { described_class.leaky("x", 1, Float::NAN) }.to raise_error(ArgumentError, /interval/)
      expect { described_class.leaky("x", 1, "1") }.to raise_error(TypeError, /interval/)
      expect { described_class.leaky("x", 1, :fortnight) }.to raise_error(ArgumentError, /interval/)
      expect { described_class.leaky("x", 1, 1, burst: -1) }.to raise_error(ArgumentError, /burst/)
      expect { described_class.window("x", 1, 1, wait_timeout: -1) }.to raise_error(ArgumentError, /wait_timeout/)
      expect { described_class.window("x", 1, 1, sliding: "yes") }.to raise_error(TypeError, /sliding/)
      expect { described_class.window("x", 1, 1).within_limit }.to raise_error(ArgumentError, /block/)
      expect { described_class.new("x", :window, 1, 1) }.to raise_error(NoMethodError)
      expect(described_class.window("x", 1, :minute).interval).to eq(60.0)
    end

    it "raises ConnectionError when Redis is down" do
      port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
      client = Ferrolock::Client.new(url: "redis://127.0.0.1:#{port}", connect_timeout: 0.5, read_timeout: 0.5)
      limiter = described_class.bucket("down", 1, 1, client: client)
      expect { limiter.within_limit { nil } }.to raise_error(Ferrolock::ConnectionError)
      expect { limiter.status }.to raise_error(Ferrolock::ConnectionError)
    end
  end
end
