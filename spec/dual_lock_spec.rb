# frozen_string_literal: true

require "spec_helper"
require "json"

RSpec.describe Ferrolock::DualLock do
  let(:redis) { FerrolockTest.redis_server.redis }

  def events_of(*names)
    events = Queue.new
    subscription = Ferrolock.subscribe(*names) { |event, payload| events << [event, payload] }
    yield
    Array.new(events.size) { events.pop }
  ensure
    Ferrolock.unsubscribe(subscription)
  end

  # Holds EXEC for `key` in a thread until `release` is pushed to the returned queue.
  def hold_exec(key, **options)
    started = Queue.new
    release = Queue.new
    thread = Thread.new do
      described_class.new(key, **options).run do
        started << true
        release.pop
      end
    end
    started.pop
    [thread, release]
  end

  # "name:sec.usec" entries (Redis TIME) as { name => seconds }.
  def redis_times(list)
    redis.lrange(list, 0, -1).to_h do |entry|
      name, sec, usec = entry.split(/[:.]/)
      [name, sec.to_i + (usec.to_i / 1e6)]
    end
  end

  it "runs the block, returns true and leaves no key behind" do
    ran = false
    expect(described_class.new("plain").run { ran = true }).to be(true)
    expect(ran).to be(true)
    expect(redis.keys("*")).to be_empty
  end

  it "runs, waits then skips duplicates arriving at 0, 0.1 and 0.3 s in three processes" do
    code = <<~RUBY
      require "ferrolock"
      Ferrolock.client.call("RPUSH", "ready", ARGV[0])
      Ferrolock::Client.new(read_timeout: 30).call("BLPOP", "go:" + ARGV[0], "25")
      sleep Float(ARGV[1])
      lock = Ferrolock::DualLock.new("orig", max_wait: 10)
      ran = lock.run do
        Ferrolock.client.call("RPUSH", "starts", ARGV[0] + ":" + Ferrolock.client.call("TIME").join("."))
        sleep 0.6
        Ferrolock.client.call("RPUSH", "ends", ARGV[0] + ":" + Ferrolock.client.call("TIME").join("."))
      end
      print ran
    RUBY
    procs = [%w[a 0], %w[b 0.1], %w[c 0.3]].map do |name, delay|
      Thread.new { run_ruby!("ARGV.replace(#{[name, delay].inspect}); #{code}") }
    end
    # All three booted (a BLPOP count would also see other examples' waiters on this Redis).
    wait_until(timeout: 40, what: -> { "ready: #{redis.lrange("ready", 0, -1)}" }) { redis.llen("ready") == 3 }
    sleep 0.2 # from RPUSH to blocking in BLPOP
    %w[a b c].each { |name| redis.rpush("go:#{name}", "1") }
    results = procs.map(&:value)
    expect(results).to eq(%w[true true false])
    starts = redis_times("starts")
    ends = redis_times("ends")
    expect(starts.keys).to eq(%w[a b])
    expect(starts["b"]).to be >= ends["a"]
    # Woken by the release, not by a timer: the wait's only timer is 10 s (wait_timeout; the
    # holder's lease is 60 s), so 2 s leaves a loaded machine room and still tells them apart.
    expect(starts["b"] - ends["a"]).to be < 2
  end

  it "covers every trigger of 3 processes x 4 threads by a run that started after it, one run at a time" do
    # Skips happen in Redis and, while a thread of the same process waits, in the process itself
    # (no command): either way a run must start after every trigger. Times are Redis TIME, so the
    # processes share one clock; a trigger's time is taken just before its `run`.
    code = <<~RUBY
      require "ferrolock"
      require "json"
      now = -> { Ferrolock.client.call("TIME").then { |s, us| Integer(s) + (Integer(us) / 1e6) } }
      Ferrolock.client.call("RPUSH", "ready", ARGV[0])
      Ferrolock::Client.new(read_timeout: 30).call("BLPOP", "go:" + ARGV[0], "25")
      lock = Ferrolock::DualLock.new("cover", max_wait: 20)
      log = Queue.new
      Array.new(4) do
        Thread.new do
          30.times do
            triggered = now.call
            ran = lock.run do
              started = now.call
              sleep(rand * 0.003)
              log << [:run, started, now.call]
            end
            log << [:trigger, triggered, ran]
            sleep(rand * 0.002)
          end
        end
      end.each(&:join)
      print JSON.dump(Array.new(log.size) { log.pop })
    RUBY
    names = %w[p1 p2 p3]
    procs = names.map { |name| Thread.new { run_ruby!("ARGV.replace(#{[name].inspect}); #{code}", timeout: 60) } }
    wait_until(timeout: 40, what: -> { "ready: #{redis.lrange("ready", 0, -1)}" }) { redis.llen("ready") == 3 }
    sleep 0.2 # from RPUSH to blocking in BLPOP
    names.each { |name| redis.rpush("go:#{name}", "1") }
    entries = procs.flat_map { |t| JSON.parse(t.value) }
    runs = entries.select { |e| e[0] == "run" }.map { |_, started, ended| [started, ended] }.sort
    triggers = entries.select { |e| e[0] == "trigger" }
    expect(triggers.size).to eq(3 * 4 * 30)
    expect(triggers.count { |e| e[2] == false }).to be > 0 # the example is about skips
    runs.each_cons(2) do |(_, ended), (started, _)|
      expect(started).to be >= ended, "two runs overlapped: one started at #{started}, before #{ended}"
    end
    last_start = runs.last[0]
    uncovered = triggers.reject { |_, at, _| last_start >= at }
    expect(uncovered).to be_empty, "triggers with no run started after them: #{uncovered.first(5)}"
    expect(redis.keys("*{cover}*")).to be_empty
  end

  it "lets a duplicate arriving after this process's waiter started wait and run (not skipped)" do
    thread, release = hold_exec("started")
    started = Queue.new
    finish = Queue.new
    waiter = Thread.new { described_class.new("started").run { started << true and finish.pop } }
    wait_until(timeout: 20, what: "the first duplicate waiting") { described_class.new("started").waiting? }
    release << true
    wait_until(timeout: 20, what: "the waiter running") { started.size == 1 }
    late = Thread.new { described_class.new("started", max_wait: 20).run { :late } }
    wait_until(timeout: 20, what: -> { "the late duplicate waiting (alive: #{late.alive?})" }) do
      !late.alive? || described_class.new("started").waiting?
    end
    expect(late).to be_alive # skipped would have returned at once
    finish << true
    expect([thread.value, waiter.value, late.value]).to eq([true, true, true])
  end

  it "wakes every waiter as soon as the run before it ends (10 threads x 100 duplicates)" do
    worst = Array.new(10) do
      Thread.new do
        Array.new(100) do
          elapsed { described_class.new("burst", max_wait: 5).run { nil } }
        end.max
      end
    end.map(&:value).max
    # A missed wake-up would show as a run waiting out max_wait (5 s).
    expect(worst).to be < 2
  end

  it "skips a duplicate while one waits, with a :skipped event carrying the tags" do
    thread, release = hold_exec("skip")
    waiter = Thread.new { described_class.new("skip").run { :ran } }
    wait_until { described_class.new("skip").waiting? }
    events = events_of(:skipped) do
      expect(described_class.new("skip").run(tags: { jid: "j1" }) { raise "must not run" }).to be(false)
    end
    expect(events).to eq([[:skipped, { primitive: :dual_lock, key: "skip", name: "skip", jid: "j1",
                                       reason: :already_waiting }]])
    release << true
    expect([thread.value, waiter.value]).to eq([true, true])
  end

  it "synchronize returns the block's value when it ran, and `skipped:` (nil) when skipped" do
    expect(described_class.new("value").synchronize { 42 }).to eq(42)
    thread, release = hold_exec("value")
    waiter = Thread.new { described_class.new("value").synchronize { :waited } }
    wait_until { described_class.new("value").waiting? }
    expect(described_class.new("value").synchronize { raise "must not run" }).to be_nil
    expect(described_class.new("value").synchronize(skipped: :dup) { raise "must not run" }).to eq(:dup)
    release << true
    expect([thread.value, waiter.value]).to eq([true, :waited])
  end

  it "raises TimeoutError past max_wait and gives up its place to the next duplicate" do
    thread, release = hold_exec("slow")
    lock = described_class.new("slow", max_wait: 0.3)
    events = events_of(:wait_timeout) do
      took = elapsed do
        expect { lock.run { raise "must not run" } }.to raise_error(Ferrolock::TimeoutError, /wait_timeout/)
      end
      expect(took).to be_between(0.25, 3)
    end
    expect(events.map(&:first)).to eq([:wait_timeout])
    expect(lock.waiting?).to be(false)
    expect(lock.executing?).to be(true)
    next_waiter = Thread.new { described_class.new("slow").run { :ran } }
    wait_until { lock.waiting? }
    release << true
    expect([thread.value, next_waiter.value]).to eq([true, true])
  end

  it "releases its WAIT place when the waiting thread is killed or interrupted" do
    thread, release = hold_exec("intr")
    lock = described_class.new("intr", max_wait: nil)
    waiter = Thread.new { lock.run { raise "must not run" } }
    waiter.report_on_exception = false # it is meant to die of the Interrupt
    wait_until { lock.waiting? }
    took = elapsed do
      waiter.raise(Interrupt, "stop")
      expect { waiter.join }.to raise_error(Interrupt)
    end
    expect(took).to be < 2
    expect(lock.waiting?).to be(false)
    release << true
    thread.join
  end

  it "keeps other Ruby threads running while it waits (the GVL is released)" do
    thread, release = hold_exec("gvl")
    waiter = Thread.new { described_class.new("gvl", max_wait: 1).run { :ran } }
    count = 0
    deadline = monotonic + 0.5
    count += 1 while monotonic < deadline
    expect(count).to be > 10_000
    release << true
    expect([thread.value, waiter.value]).to eq([true, true])
  end

  it "releases EXEC when the block raises, so the waiter runs" do
    order = Queue.new
    runner = Thread.new do
      described_class.new("boom").run do
        order << :first
        sleep 0.3
        raise ArgumentError, "job failed"
      end
    end
    runner.report_on_exception = false # its ArgumentError is the point of the example
    sleep 0.05 until order.size == 1
    waiter = Thread.new { described_class.new("boom").run { order << :second } }
    expect { runner.join }.to raise_error(ArgumentError, "job failed")
    expect(waiter.value).to be(true)
    expect([order.pop, order.pop]).to eq(%i[first second])
  end

  it "raises LockLost when the EXEC lock was taken over during the run" do
    lock = described_class.new("stolen")
    events = events_of(:lock_lost) do
      expect do
        lock.run { redis.set(Ferrolock.client.key("stolen", "exec"), "intruder") }
      end.to raise_error(Ferrolock::LockLost)
    end
    expect(events.map(&:first)).to eq([:lock_lost])
    expect(redis.get(Ferrolock.client.key("stolen", "exec"))).to eq("intruder")
  end

  it "keeps the block's own exception when the release also fails" do
    lock = described_class.new("stolen2")
    expect do
      lock.run do
        redis.set(Ferrolock.client.key("stolen2", "exec"), "intruder")
        raise KeyError, "original"
      end
    end.to raise_error(KeyError, "original")
  end

  it "keeps a run longer than exec_ttl exclusive (the lease is renewed)" do
    thread, release = hold_exec("renew", exec_ttl: 0.3)
    sleep 1.0
    lock = described_class.new("renew", exec_ttl: 0.3, max_wait: 0.5)
    expect(lock.executing?).to be(true)
    expect { lock.run { raise "second executor" } }.to raise_error(Ferrolock::TimeoutError)
    release << true
    thread.join
  end

  it "lets a waiter run exec_ttl after the executing process was killed with SIGKILL" do
    code = <<~RUBY
      require "ferrolock"
      Ferrolock::DualLock.new("crash", exec_ttl: 2).run do
        Ferrolock.client.call("SET", "started", "1")
        Process.kill("KILL", Process.pid)
      end
    RUBY
    _out, _err, status = run_ruby(code)
    expect(status.signaled? && status.termsig == 9).to be(true)
    expect(redis.get("started")).to eq("1")
    lock = described_class.new("crash", exec_ttl: 2, max_wait: 10)
    expect(lock.executing?).to be(true)
    took = elapsed { expect(lock.run { :ran }).to be(true) }
    expect(took).to be < 4
  end

  it "raises ConnectionError without running the block when Redis is down" do
    lock = described_class.new("down")
    FerrolockTest.redis_server.stop
    ran = false
    expect { lock.run { ran = true } }.to raise_error(Ferrolock::ConnectionError)
    expect(ran).to be(false)
  ensure
    FerrolockTest.redis_server.start
  end

  it "names the argument on bad input" do
    expect { described_class.new(nil) }.to raise_error(TypeError, /key/)
    expect { described_class.new("") }.to raise_error(ArgumentError, /key/)
    expect { described_class.new("a{b}") }.to raise_error(ArgumentError, /key/)
    expect { described_class.new("k", wait_ttl: 0) }.to raise_error(ArgumentError, /wait_ttl/)
    expect { described_class.new("k", exec_ttl: -1) }.to raise_error(ArgumentError, /exec_ttl/)
    expect { described_class.new("k", exec_ttl: "60") }.to raise_error(TypeError, /exec_ttl/)
    expect { described_class.new("k", max_wait: -1) }.to raise_error(ArgumentError, /max_wait/)
    expect { described_class.new("k", client: "redis://x") }.to raise_error(TypeError, /client/)
    expect { described_class.new("k").run }.to raise_error(ArgumentError, /block/)
  end
end
