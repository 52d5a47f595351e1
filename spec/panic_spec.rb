# frozen_string_literal: true

# A Rust panic is caught in the GVL-free trampoline and raised once the GVL is back.
RSpec.describe "a panic in the Rust core" do
  it "arrives as Ferrolock::Error, and the process carries on" do
    expect { Ferrolock::Native.panic_for_test }
      .to raise_error(Ferrolock::Error, /internal error in ferrolock: deliberate panic/)
    expect(Ferrolock.client.ping).to eq("PONG")
  end
end

# A thread still inside a ferrolock call when the process exits is killed by Ruby. The error that
# call was about to raise must not turn the kill into a Rust panic (which aborts: exit 134).
RSpec.describe "threads in a ferrolock call at process exit" do
  include FerrolockTest::Processes

  it "end with the process, which exits normally" do
    code = <<~RUBY
      require "ferrolock"
      dead = Ferrolock::Client.new(url: "redis://127.0.0.1:1/0", connect_timeout: 3)
      4.times { Thread.new { loop { dead.ping rescue nil } } }
      held = Ferrolock::DistMutex.new("exit-#{Process.pid}", lease: 5)
      held.lock
      2.times { Thread.new { loop { held.lock(timeout: 0.2) rescue nil } } }
      sleep 0.3
    RUBY
    5.times do
      _out, err, status = run_ruby(code)
      expect([status.exitstatus, status.termsig]).to eq([0, nil]), err
    end
  end
end
