# frozen_string_literal: true

require "timeout"

# A call blocked in Rust (here: waiting on a SIGSTOPped Redis, read_timeout
# 10 s) releases the GVL and ends promptly when Ruby interrupts its thread.
RSpec.describe "interrupting a blocked call" do
  let(:stopped) { FerrolockTest::RedisServer.new.start }
  let(:client) { Ferrolock::Client.new(url: stopped.url, connect_timeout: 10, read_timeout: 10) }

  before do
    client.ping
    stopped.pause
  end

  after { stopped.destroy }

  def blocked_thread(&on_error)
    thread = Thread.new do
      client.call("PING")
    rescue Exception => e # rubocop:disable Lint/RescueException
      on_error&.call(e)
      raise
    end
    thread.report_on_exception = false
    sleep 0.2 # let it reach the socket read
    expect(thread).to be_alive
    thread
  end

  it "ends on Thread#kill within 100 ms" do
    thread = blocked_thread
    took, late = elapsed_and_lateness do
      thread.kill
      thread.join(2)
    end
    expect(thread).not_to be_alive
    expect(took).to be < late_bound(0.1, late)
  end

  it "ends on Thread#raise within 100 ms" do
    stop = Class.new(StandardError)
    thread = blocked_thread
    took, late = elapsed_and_lateness do
      thread.raise(stop, "stop waiting")
      expect { thread.join(2) }.to raise_error(stop)
    end
    expect(took).to be < late_bound(0.1, late)
  end

  it "ends on Timeout.timeout(0.2) within 0.3 s" do
    took, late = elapsed_and_lateness do
      expect { Timeout.timeout(0.2) { client.call("PING") } }.to raise_error(Timeout::Error)
    end
    expect(took).to be < late_bound(0.3, late)
  end

  it "lets other Ruby threads run meanwhile (the GVL is released)" do
    thread = blocked_thread
    counter = 0
    spinner = Thread.new do
      deadline = monotonic + 0.3
      counter += 1 while monotonic < deadline
    end
    spinner.join
    expect(thread).to be_alive
    expect(counter).to be > 10_000
  ensure
    thread&.kill&.join(2)
  end

  it "leaves the client usable once the server answers again" do
    thread = blocked_thread
    thread.kill.join(2)
    stopped.resume
    expect(client.call("ECHO", "after")).to eq("after")
    expect(Array.new(20) { |i| client.call("ECHO", i.to_s) }).to eq(Array.new(20, &:to_s))
  end
end
