# frozen_string_literal: true

# Issue 24, item 5: a caller's timeout bounds its call even when Redis stalls (SIGSTOP), not the
# read_timeout. Each read is cut at the deadline + 0.25 s; the core tells the stall (issue 40, item 7:
# ext/ferrolock-core/src/wait_timeout.rs), the primitive's own timeout error is raised (its cause: a
# ConnectionError naming host:port), the cut connection is dropped, and whatever the cut call may have
# acquired is released once Redis answers again.
RSpec.describe "a stalled Redis and the caller's timeout" do
  let(:server) { FerrolockTest.redis_server }
  let(:client) { Ferrolock::Client.new(url: server.url, read_timeout: 5) }

  around do |example|
    example.run
  ensure
    server.resume
  end

  # The call's error and how long it took, with Redis stopped throughout.
  def while_stalled
    server.pause
    started = monotonic
    error = begin
      yield
      nil
    rescue StandardError => e
      e
    end
    [error, monotonic - started]
  end

  def keys(names)
    server.redis.keys("ferrolock:{#{names}}:*").reject { |key| key.end_with?(":fence") }
  end

  # Redis answers again: the bounded call's server side (it may have run) leaves nothing held.
  # The stall the core told, as the timeout error's cause.
  def expect_stall_cause(error)
    expect(error.cause).to be_a(Ferrolock::ConnectionError)
    expect(error.cause).to be_a(Ferrolock::WaitTimeout::Stalled)
    expect(error.cause.message).to include("#{server.host}:#{server.port}")
  end

  def nothing_held_after_resume(names)
    server.resume
    wait_until(timeout: 8, what: -> { "keys gone (left: #{keys(names)})" }) { keys(names).empty? }
  end

  it "ends DistMutex#lock(wait_timeout:) by its wait_timeout with TimeoutError" do
    mutex = Ferrolock::DistMutex.new("stall:mutex", lease: 3, client: client)
    mutex.synchronize { nil } # a pooled connection exists: the stall hits a read, not the connect
    error, took = while_stalled { mutex.lock(wait_timeout: 0.5) }
    expect(error).to be_a(Ferrolock::TimeoutError)
    expect_stall_cause(error)
    expect(took).to be < 1.5
    expect(mutex.owned?).to be(false)
    nothing_held_after_resume("stall:mutex")
    expect(mutex.synchronize { :works }).to eq(:works)
  end

  it "ends ConcurrentLimiter#within_limit by its wait_timeout with OverLimit" do
    limiter = Ferrolock::ConcurrentLimiter.new("stall:limiter", 1, wait_timeout: 0.5, lease: 3, client: client)
    ran = false
    error, took = while_stalled { limiter.within_limit { ran = true } }
    expect(error).to be_a(Ferrolock::OverLimit)
    expect_stall_cause(error)
    expect(took).to be < 1.5
    expect(ran).to be(false)
    nothing_held_after_resume("stall:limiter")
    expect(limiter.within_limit { :works }).to eq(:works)
  end

  it "ends DualLock#run by its wait_timeout with TimeoutError" do
    lock = Ferrolock::DualLock.new("stall:dual", wait_lease: 3, lease: 3, wait_timeout: 0.5, client: client)
    ran = false
    error, took = while_stalled { lock.run { ran = true } }
    expect(error).to be_a(Ferrolock::TimeoutError)
    expect_stall_cause(error)
    expect(took).to be < 1.5
    expect(ran).to be(false)
    nothing_held_after_resume("stall:dual")
    expect(lock.run { nil }).to be(true)
  end

  it "ends RateLimiter#within_limit by its wait_timeout with OverLimit" do
    limiter = Ferrolock::RateLimiter.window("stall:rate", 5, 10, wait_timeout: 0.5, client: client)
    limiter.within_limit { nil }
    ran = false
    error, took = while_stalled { limiter.within_limit { ran = true } }
    expect(error).to be_a(Ferrolock::OverLimit)
    expect_stall_cause(error)
    expect(took).to be < 1.5
    expect(ran).to be(false)
    server.resume
    expect(limiter.within_limit { :works }).to eq(:works)
  end

  it "bounds a new connection's handshake too" do
    mutex = Ferrolock::DistMutex.new("stall:connect", client: Ferrolock::Client.new(url: server.url,
                                                                                    read_timeout: 5,
                                                                                    connect_timeout: 5))
    error, took = while_stalled { mutex.lock(wait_timeout: 0.5) }
    expect(error).to be_a(Ferrolock::TimeoutError)
    expect_stall_cause(error)
    expect(took).to be < 1.5
  end

  it "keeps ConnectionError for a call without a wait_timeout, after read_timeout" do
    mutex = Ferrolock::DistMutex.new("stall:none", client: Ferrolock::Client.new(url: server.url, read_timeout: 0.5))
    mutex.synchronize { nil }
    error, took = while_stalled { mutex.lock }
    expect(error).to be_a(Ferrolock::ConnectionError)
    expect(error).not_to be_a(Ferrolock::WaitTimeout::Stalled)
    expect(error.message).to include("#{server.host}:#{server.port}")
    expect(took).to be >= 0.5
  end

  it "keeps ConnectionError for a connection refused before the wait_timeout ran out" do
    port = TCPServer.open("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
    mutex = Ferrolock::DistMutex.new("stall:refused", client: Ferrolock::Client.new(url: "redis://127.0.0.1:#{port}"))
    error = begin
      mutex.lock(wait_timeout: 30)
    rescue StandardError => e
      e
    end
    expect(error).to be_a(Ferrolock::ConnectionError)
    expect(error).not_to be_a(Ferrolock::WaitTimeout::Stalled)
    expect(error.message).to include("127.0.0.1:#{port}")
  end
end
