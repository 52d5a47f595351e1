# frozen_string_literal: true

require "timeout"

RSpec.describe Ferrolock::DistMutex do
  let(:redis) { FerrolockTest.redis_server.redis }

  def mutex(name = "m", **options)
    described_class.new(name, **options)
  end

  describe "Ruby Mutex API" do
    it "runs a block holding the lock and returns its value" do
      m = mutex
      result = m.synchronize { [m.owned?, m.locked?, m.fencing_token] }
      expect(result[0..1]).to eq([true, true])
      expect(result[2]).to be_a(Integer)
      expect([m.owned?, m.locked?, m.fencing_token]).to eq([false, false, nil])
    end

    it "supports lock/unlock/try_lock and returns self like Mutex" do
      m = mutex
      expect(m.lock).to be(m)
      expect(m.try_lock).to be(false)
      expect(mutex.try_lock).to be(false) # another object, same name
      expect(m.unlock).to be(m)
      expect(m.try_lock).to be(true)
      m.unlock
    end

    it "raises ThreadError on recursive locking, like Mutex" do
      m = mutex
      m.synchronize do
        expect { m.lock }.to raise_error(ThreadError, /recursive locking/)
        expect { m.synchronize { nil } }.to raise_error(ThreadError)
      end
    end

    it "raises ThreadError when a non-owner unlocks, like Mutex" do
      m = mutex
      m.lock
      other = Thread.new do
        Thread.current.report_on_exception = false
        m.unlock
      end
      expect { other.join }.to raise_error(ThreadError)
      expect { mutex.unlock }.to raise_error(ThreadError)
      m.unlock
    end

    it "excludes two threads of one process like two hosts" do
      m = mutex
      inside = 0
      max = 0
      threads = Array.new(6) do
        Thread.new do
          30.times do
            m.synchronize do
              inside += 1
              max = [max, inside].max
              sleep 0.001
              inside -= 1
            end
          end
        end
      end
      threads.each(&:join)
      expect(max).to eq(1)
    end

    it "gives up after timeout: with Ferrolock::TimeoutError" do
      holder = mutex
      holder.lock
      waiter = mutex
      took = elapsed { expect { waiter.lock(timeout: 0.2) }.to raise_error(Ferrolock::TimeoutError) }
      expect(took).to be_between(0.2, 1.0)
      expect { waiter.lock(timeout: 0) }.to raise_error(Ferrolock::TimeoutError)
      holder.unlock
    end

    it "keeps a short timeout: (Redis alone would end the wait at its next 100 ms tick)" do
      holder = mutex
      holder.lock
      waiter = mutex
      runs = Array.new(5) do
        elapsed_and_lateness { expect { waiter.lock(timeout: 0.03) }.to raise_error(Ferrolock::TimeoutError) }
      end
      expect(runs.map(&:first).min).to be >= 0.03
      # Most end within 50 ms of the timeout, plus what the machine's load delayed them.
      expect(runs.count { |took, late| took < late_bound(0.08, late) }).to be >= 3
      holder.unlock
    end
  end

  describe "leases and fencing" do
    it "hands out fencing tokens that strictly increase across holders" do
      tokens = Array.new(5) do
        m = mutex
        m.synchronize { m.fencing_token }
      end
      expect(tokens).to eq(tokens.sort.uniq)
      expect(tokens.size).to eq(5)
    end

    it "raises LockLost when the lock vanished while held" do
      m = mutex("lost")
      events = []
      sub = Ferrolock.subscribe { |event, payload| events << [event, payload[:name]] }
      expect do
        m.synchronize { redis.del("ferrolock:{lost}:lock") }
      end.to raise_error(Ferrolock::LockLost)
      expect(events).to include([:lock_lost, "lost"])
      expect(m.owned?).to be(false)
    ensure
      Ferrolock.unsubscribe(sub)
    end

    it "keeps a block running 3x the lease exclusive" do
      m = mutex("long", lease: 0.3)
      m.lock
      other = mutex("long")
      intrusions = 0
      deadline = monotonic + 1.0
      checker = Thread.new do
        while monotonic < deadline
          intrusions += 1 if other.try_lock
          sleep 0.05
        end
      end
      checker.join
      m.unlock
      expect(intrusions).to eq(0)
    end
  end

  describe "expire: n, auto_release: false (the crawler's spacer)" do
    # The starts are the grants' times on Redis' clock: a fencing token is Redis' TIME in µs when the
    # lock was granted (dist_mutex/acquire.lua, rounded up to 16 µs). A client clock read as the
    # block starts runs late by however long the thread waited for a core (0.167 s apart once, on
    # a loaded machine), so it cannot check a 0.2 s spacing.
    it "starts holders at least n seconds apart on Redis' clock, letting blocks overlap" do
      starts = Queue.new
      spans = Queue.new
      redis_now = redis.time.then { |seconds, micros| (seconds * 1_000_000) + micros }
      threads = Array.new(5) do
        Thread.new do
          m = mutex("crawl", expire: 0.2, auto_release: false)
          3.times do
            m.synchronize do
              started = monotonic
              starts << m.fencing_token
              sleep 0.5
              spans << [started, monotonic]
            end
          end
        end
      end
      threads.each(&:join)
      times = Array.new(starts.size) { starts.pop }.sort
      expect(times.size).to eq(15)
      # (Tokens that stopped being Redis' time would fail here, not pass below.)
      expect(times.first - redis_now).to be_between(0, 60_000_000)
      gaps = times.each_cons(2).map { |a, b| (b - a) / 1_000_000.0 }
      expect(gaps.min).to be >= 0.2 - 0.000_1 # a grant's TIME is read a few µs into its script
      spans = Array.new(spans.size) { spans.pop }.sort
      overlapping = spans.each_cons(2).count { |(_, end1), (start2, _)| start2 < end1 }
      expect(overlapping).to be > 0
    end

    # Why the spacing above holds on a loaded server: the lock's expiry counts from the Redis time
    # its fencing token was read at, not from the earlier instant Redis took as its script began
    # (PX), which once put two starts 0.192 s apart for expire: 0.2.
    it "sets each hold's expiry n after its fencing token (PEXPIRETIME, Redis' clock)" do
      5.times do |i|
        m = mutex("crawl-expiry-#{i}", expire: 0.2, auto_release: false)
        m.lock
        expires_us = redis.call("PEXPIRETIME", "ferrolock:{crawl-expiry-#{i}}:lock") * 1000
        expect(expires_us).to be >= m.fencing_token - 15 + 200_000 # a token is rounded up to 16 µs
        m.unlock
      end
    end
  end

  describe "processes" do
    it "excludes 4 processes x 8 threads x 200 sections (no overlap)" do
      code = <<~RUBY
        require "ferrolock"
        require "redis"
        threads = Array.new(8) do
          Thread.new do
            r = Redis.new(url: ENV["REDIS_URL"])
            m = Ferrolock::DistMutex.new("shared")
            200.times do
              m.synchronize do
                r.incr("overlaps") if r.incr("inside") > 1
                r.decr("inside")
                r.incr("sections")
              end
            end
          end
        end
        threads.each(&:join)
      RUBY
      4.times.map { Thread.new { run_ruby!(code, timeout: 240) } }.each(&:join)
      expect(redis.get("sections").to_i).to eq(4 * 8 * 200)
      expect(redis.get("overlaps").to_i).to eq(0)
    end

    it "frees the lock of a process killed with kill -9 within lease + 1 s" do
      code = <<~RUBY
        require "ferrolock"
        Ferrolock::DistMutex.new("crash", lease: 1).synchronize do
          $stdout.puts "locked"
          $stdout.flush
          sleep 60
        end
      RUBY
      env = { "REDIS_URL" => FerrolockTest.redis_server.url }
      pid = Process.spawn(env, RbConfig.ruby, "-I", FerrolockTest::LIB, "-e", code, out: (reader, writer = IO.pipe)[1])
      writer.close
      Timeout.timeout(20) { expect(reader.gets).to eq("locked\n") }
      sleep 1.5 # renewed meanwhile: still held well past its 1 s lease
      expect(mutex("crash").try_lock).to be(false)
      Process.kill("KILL", pid)
      Process.wait(pid)
      killed_at = monotonic
      m = mutex("crash")
      m.lock(timeout: 5)
      expect(monotonic - killed_at).to be < 1 + 1
      m.unlock
    end

    it "works in a forked child with a mutex created in the parent" do
      m = mutex("forked")
      m.synchronize { nil }
      read, write = IO.pipe
      pid = fork do
        read.close
        token = m.synchronize { m.fencing_token }
        write.puts(token)
        exit!(0)
      end
      write.close
      child_token = read.read.to_i
      _, status = Process.wait2(pid)
      expect(status.success?).to be(true)
      expect(child_token).to be > 1
      expect(m.synchronize { m.fencing_token }).to be > child_token
    end
  end

  describe "interrupting a waiter" do
    let(:holder) { mutex("busy").tap(&:lock) }

    after { holder.unlock }

    def waiting_thread
      holder
      thread = Thread.new { mutex("busy").lock }
      thread.report_on_exception = false
      sleep 0.2
      expect(thread).to be_alive
      thread
    end

    it "ends on Thread#kill within 100 ms" do
      thread = waiting_thread
      took, late = elapsed_and_lateness do
        thread.kill
        thread.join(2)
      end
      expect(thread).not_to be_alive
      expect(took).to be < late_bound(0.1, late)
    end

    it "ends on Timeout.timeout within 100 ms of the timeout" do
      holder
      took, late = elapsed_and_lateness do
        expect { Timeout.timeout(0.2) { mutex("busy").lock } }.to raise_error(Timeout::Error)
      end
      expect(took).to be < late_bound(0.3, late)
    end

    it "lets other threads run while one waits" do
      thread = waiting_thread
      counter = 0
      counting = Thread.new { loop { counter += 1 } }
      sleep 0.2
      counting.kill
      thread.kill
      expect(counter).to be > 1000
    end
  end

  describe "Redis faults" do
    let(:server) { FerrolockTest.redis_server }

    it "raises LockLost at unlock when Redis restarted (without persistence) under the holder" do
      m = mutex("restart", lease: 0.6)
      m.lock
      server.restart
      sleep 0.5 # the watchdog finds the lease gone on its next renewal
      expect { m.unlock }.to raise_error(Ferrolock::LockLost)
      expect(m.owned?).to be(false)
      again = mutex("restart")
      expect(again.try_lock).to be(true)
      again.unlock
    end

    it "raises ConnectionError naming host:port within the timeout when Redis is down" do
      client = Ferrolock::Client.new(connect_timeout: 0.5, read_timeout: 0.5)
      m = described_class.new("down", client: client)
      server.stop
      took = elapsed { expect { m.lock }.to raise_error(Ferrolock::ConnectionError, /127.0.0.1:#{server.port}/) }
      expect(took).to be < 1.5
    ensure
      server.start
    end

    it "raises ConnectionError within read_timeout when Redis hangs (SIGSTOP), then recovers" do
      client = Ferrolock::Client.new(connect_timeout: 0.5, read_timeout: 0.5)
      m = described_class.new("hang", client: client)
      m.synchronize { nil }
      server.pause
      took = elapsed { expect { m.lock }.to raise_error(Ferrolock::ConnectionError, /timed out/) }
      expect(took).to be < 1.5
      server.resume
      # The attempt sent into the paused server ran once it resumed; its token was released in
      # the background, so the lock is free now rather than after its 30 s lease.
      took = elapsed { expect(m.synchronize(timeout: 5) { :ok }).to eq(:ok) }
      expect(took).to be < 2
    ensure
      server.resume
    end
  end

  describe "bad input" do
    it "names the argument" do
      expect { described_class.new(nil) }.to raise_error(TypeError, /name/)
      expect { described_class.new("") }.to raise_error(ArgumentError, /name/)
      expect { described_class.new("a{b") }.to raise_error(ArgumentError, /name/)
      expect { described_class.new("m", expire: "1") }.to raise_error(TypeError, /expire/)
      expect { described_class.new("m", expire: 0) }.to raise_error(ArgumentError, /expire/)
      expect { described_class.new("m", lease: -1) }.to raise_error(ArgumentError, /lease/)
      expect { described_class.new("m", auto_release: false) }.to raise_error(ArgumentError, /auto_release/)
      expect { described_class.new("m", auto_release: nil) }.to raise_error(TypeError, /auto_release/)
      expect { described_class.new("m", client: "redis://x") }.to raise_error(TypeError, /client/)
      expect { described_class.new("m", expires: 1) }.to raise_error(ArgumentError, /expires/)
      expect { mutex.lock(timeout: "soon") }.to raise_error(TypeError, /timeout/)
      expect { mutex.lock(timeout: -1) }.to raise_error(ArgumentError, /timeout/)
    end
  end
end
