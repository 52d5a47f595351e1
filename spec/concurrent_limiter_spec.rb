# frozen_string_literal: true

require "rbconfig"
require "timeout"

RSpec.describe Ferrolock::ConcurrentLimiter do
  let(:redis) { FerrolockTest.redis_server.redis }

  def spawn_ruby(code)
    env = { "REDIS_URL" => FerrolockTest.redis_server.url }
    args = [RbConfig.ruby, "-I", FerrolockTest::LIB, "-e", code]
    Process.spawn(env, *args, pgroup: true, out: File::NULL, err: $stderr)
  end

  describe "#within_limit" do
    it "returns the block's value and frees the slot afterwards" do
      limiter = described_class.new("basic", 2)
      expect(limiter.within_limit { limiter.status }).to eq(limit: 2, in_use: 1, waiting: 0)
      expect(limiter.within_limit { :value }).to eq(:value)
      expect(limiter.status).to eq(limit: 2, in_use: 0, waiting: 0)
    end

    it "frees the slot when the block raises, and keeps the block's exception" do
      limiter = described_class.new("raises", 1)
      expect { limiter.within_limit { raise "boom" } }.to raise_error(RuntimeError, "boom")
      expect(limiter.status[:in_use]).to eq(0)
    end

    it "raises OverLimit carrying the limiter when no slot frees within wait_timeout" do
      limiter = described_class.new("full", 1, wait_timeout: 0.3)
      holder = Thread.new { limiter.within_limit { sleep 2 } }
      wait_until { limiter.status[:in_use] == 1 }
      error = nil
      took = elapsed do
        limiter.within_limit { raise "must not run" }
      rescue Ferrolock::OverLimit => e
        error = e
      end
      expect(error).to be_a(Ferrolock::OverLimit)
      expect(error.limiter).to equal(limiter)
      expect(error.message).to include("full")
      expect(took).to be_between(0.25, 1.5)
      expect { limiter.within_limit(wait_timeout: 0) { 1 } }.to raise_error(Ferrolock::OverLimit)
      expect(limiter.status).to eq(limit: 1, in_use: 1, waiting: 0)
      holder.join
    end

    it "keeps a slot while its block runs far past lock_timeout: no extra block enters" do
      limiter = described_class.new("overrun", 2, wait_timeout: 0, lock_timeout: 0.3)
      holders = Array.new(2) { Thread.new { limiter.within_limit { sleep 1.5 } } }
      wait_until { limiter.status[:in_use] == 2 }
      entered = 0
      deadline = monotonic + 1.2
      while monotonic < deadline
        begin
          limiter.within_limit { entered += 1 }
        rescue Ferrolock::OverLimit
          nil
        end
        sleep 0.05
      end
      holders.each(&:join)
      expect(entered).to eq(0)
      expect(limiter.within_limit { :free_again }).to eq(:free_again)
    end

    it "wakes a waiter when a slot frees, well before the holder's lease would run out" do
      limiter = described_class.new("wake", 1, wait_timeout: 10, lock_timeout: 30)
      released_at = nil
      holder = Thread.new do
        limiter.within_limit { sleep 0.5 }
        released_at = monotonic
      end
      wait_until { limiter.status[:in_use] == 1 }
      got_at = nil
      _, late = elapsed_and_lateness { got_at = limiter.within_limit { monotonic } }
      holder.join
      expect(got_at - released_at).to be < late_bound(0.5, late)
    end

    it "ends a wait longer than the client's read timeout in OverLimit, not a Redis timeout" do
      client = Ferrolock::Client.new(read_timeout: 0.2)
      limiter = described_class.new("slow", 1, wait_timeout: 1.5, client: client)
      holder = Thread.new { limiter.within_limit { sleep 3 } }
      wait_until { limiter.status[:in_use] == 1 }
      took = elapsed { expect { limiter.within_limit { nil } }.to raise_error(Ferrolock::OverLimit) }
      expect(took).to be_between(1.4, 4)
      expect(limiter.status[:waiting]).to eq(0)
      holder.join
    end

    it "counts waiters in status, across threads" do
      limiter = described_class.new("counted", 1, wait_timeout: 5, lock_timeout: 30)
      holder = Thread.new { limiter.within_limit { sleep 1 } }
      wait_until { limiter.status[:in_use] == 1 }
      waiters = Array.new(3) { Thread.new { limiter.within_limit { :ok } } }
      wait_until { limiter.status[:waiting] == 3 }
      expect(limiter.status).to eq(limit: 1, in_use: 1, waiting: 3)
      expect([holder, *waiters].map(&:value).drop(1)).to eq(%i[ok ok ok])
      expect(limiter.status).to eq(limit: 1, in_use: 0, waiting: 0)
    end

    it "with count 1 is a mutex" do
      limiter = described_class.new("mutex", 1, wait_timeout: 10)
      inside = 0
      max_inside = 0
      lock = Mutex.new
      Array.new(6) do
        Thread.new do
          10.times do
            limiter.within_limit do
              lock.synchronize { max_inside = [max_inside, inside += 1].max }
              sleep 0.002
              lock.synchronize { inside -= 1 }
            end
          end
        end
      end.each(&:join)
      expect(max_inside).to eq(1)
    end

    it "lets Thread#raise and Timeout end a wait promptly" do
      limiter = described_class.new("interrupt", 1, wait_timeout: 30)
      holder = Thread.new { limiter.within_limit { sleep 2 } }
      wait_until { limiter.status[:in_use] == 1 }
      took = elapsed do
        expect { Timeout.timeout(0.3) { limiter.within_limit { nil } } }.to raise_error(Timeout::Error)
      end
      expect(took).to be < 1.5
      holder.join
    end

    it "raises LockLost after a block whose slot vanished, but never hides the block's own error" do
      limiter = described_class.new("lost", 2)
      key = Ferrolock.client.key("lost", "slots")
      expect { limiter.within_limit { redis.del(key) } }.to raise_error(Ferrolock::LockLost)
      expect { limiter.within_limit { redis.del(key) && raise("own") } }.to raise_error(RuntimeError, "own")
    end

    it "emits :acquired and :over_limit events" do
      events = []
      sub = Ferrolock.subscribe(:acquired, :over_limit) { |event, payload| events << [event, payload] }
      limiter = described_class.new("events", 1, wait_timeout: 0)
      limiter.within_limit { expect { limiter.within_limit { nil } }.to raise_error(Ferrolock::OverLimit) }
      Ferrolock.unsubscribe(sub)
      expect(events.map(&:first)).to eq(%i[acquired over_limit])
      expect(events.last.last).to include(primitive: :concurrent_limiter, name: "events", limit: 1)
      expect(events.last.last[:duration]).to be_a(Float)
    end
  end

  it "never frees two slots on a double release" do
    limiter = described_class.new("double", 2)
    native = limiter.instance_variable_get(:@native)
    mine = native.acquire(0.0)
    other = native.acquire(0.0)
    native.release(mine)
    native.release(mine)
    expect(limiter.status[:in_use]).to eq(1)
    native.release(other)
  end

  # Commands clients sent: INFO counts the commands scripts run as well, but while nobody gets a
  # slot the only top-level commands are the limiter's EVALSHA/EVAL, BLPOP and ZREM.
  def client_commands(redis)
    stats = redis.info("commandstats")
    %w[evalsha eval blpop zrem].sum { |name| stats.dig(name, "calls").to_i }
  end

  it "lets a waiting thread send at most about 2 Redis commands per second" do
    # A Redis of its own: the shared one also sees earlier examples' background cleanups.
    server = FerrolockTest::RedisServer.new.start
    client = Ferrolock::Client.new(url: server.url)
    limiter = described_class.new("quiet", 1, wait_timeout: 3, lock_timeout: 30, client: client)
    holder = Thread.new { limiter.within_limit { sleep 3.5 } }
    wait_until { limiter.status[:in_use] == 1 }
    before = client_commands(server.redis)
    waiters = Array.new(4) { Thread.new { limiter.within_limit { nil } rescue :over } } # rubocop:disable Style/RescueModifier
    expect(waiters.map(&:value)).to eq([:over] * 4)
    per_second = (client_commands(server.redis) - before).to_f / (4 * 3)
    expect(per_second).to be_between(0.1, 2.0)
    holder.join
  ensure
    holder&.join
    server&.destroy
  end

  it "frees a kill -9'ed process's slots within lock_timeout + 1 s" do
    pid = spawn_ruby(<<~RUBY)
      require "ferrolock"
      limiter = Ferrolock::ConcurrentLimiter.new("crash", 3, lock_timeout: 1.5)
      Array.new(3) { Thread.new { limiter.within_limit { sleep 60 } } }.each(&:join)
    RUBY
    limiter = described_class.new("crash", 3, wait_timeout: 10, lock_timeout: 1.5)
    wait_until(timeout: 15) { limiter.status[:in_use] == 3 }
    sleep 2 # renewals keep the slots past lock_timeout while the process lives
    expect(limiter.status[:in_use]).to eq(3)
    Process.kill("KILL", -pid)
    Process.wait(pid)
    took = elapsed { limiter.within_limit { nil } }
    expect(took).to be < 2.5
  end

  # With the default local_passes (LOCAL_PASSES, 63): slots also move between a process's threads without Redis.
  it "holds the limit with 4 processes x 8 threads hammering for 10 s, and status stays consistent" do
    code = <<~RUBY
      require "ferrolock"
      require #{File.expand_path("support/most_at_once", __dir__).dump}
      limiter = Ferrolock::ConcurrentLimiter.new("hammer", 3, wait_timeout: 10, lock_timeout: 2)
      client = Ferrolock.client
      stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      counts = Array.new(8) do
        Thread.new do
          done = 0
          while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop
            begin
              limiter.within_limit do
                FerrolockTest::MostAtOnce.counted(client, "inside", "max_inside") { sleep(rand * 0.01) }
              end
              done += 1
            rescue Ferrolock::OverLimit
              nil
            end
          end
          done
        end
      end.map(&:value)
      puts counts.sum
    RUBY
    limiter = described_class.new("hammer", 3)
    runs = Array.new(4) { Thread.new { run_ruby!(code, timeout: 60) } }
    samples = []
    samples << limiter.status while runs.any?(&:alive?) && sleep(0.02)
    done = runs.map { |r| r.value.to_i }
    expect(redis.get("max_inside").to_i).to eq(3)
    expect(samples.map { |s| s[:in_use] }.max).to eq(3)
    expect(samples).to all(satisfy { |s| s[:in_use] + s[:waiting] <= 32 })
    expect(samples.map { |s| s[:waiting] }.max).to be > 0
    expect(done.sum).to be > 100
    expect(limiter.status).to eq(limit: 3, in_use: 0, waiting: 0)
  end

  describe "arguments" do
    it "rejects bad names, counts and timeouts, naming the argument" do
      expect { described_class.new("", 1) }.to raise_error(ArgumentError, /name/)
      expect { described_class.new(nil, 1) }.to raise_error(TypeError, /name/)
      expect { described_class.new("a{b}", 1) }.to raise_error(ArgumentError, /name/)
      expect { described_class.new("x", 0) }.to raise_error(ArgumentError, /count/)
      expect { described_class.new("x", -2) }.to raise_error(ArgumentError, /count/)
      expect { described_class.new("x", 1.5) }.to raise_error(TypeError, /count/)
      expect { described_class.new("x", "3") }.to raise_error(TypeError, /count/)
      expect { described_class.new("x", 1, wait_timeout: -1) }.to raise_error(ArgumentError, /wait_timeout/)
      expect { described_class.new("x", 1, local_passes: 64) }.to raise_error(ArgumentError, /local_passes/)
      expect { described_class.new("x", 1, local_passes: -1) }.to raise_error(ArgumentError, /local_passes/)
      expect { described_class.new("x", 1, local_passes: "8") }.to raise_error(TypeError, /local_passes/)
      expect { described_class.new("x", 1, wait_timeout: "5") }.to raise_error(TypeError, /wait_timeout/)
      expect { described_class.new("x", 1, lock_timeout: 0) }.to raise_error(ArgumentError, /lock_timeout/)
      expect { described_class.new("x", 1, lock_timeout: -3) }.to raise_error(ArgumentError, /lock_timeout/)
      expect { described_class.new("x", 1, client: "redis://") }.to raise_error(TypeError, /client/)
      limiter = described_class.new("x", 1)
      expect { limiter.within_limit }.to raise_error(ArgumentError, /block/)
      expect { limiter.within_limit(wait_timeout: -1) { nil } }.to raise_error(ArgumentError, /wait_timeout/)
    end

    it "uses Sidekiq Enterprise's defaults" do
      limiter = described_class.new(:erp, 5)
      expect([limiter.name, limiter.count, limiter.wait_timeout, limiter.lock_timeout]).to eq(["erp", 5, 5.0, 30.0])
    end
  end
end
