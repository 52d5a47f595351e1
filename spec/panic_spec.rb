# frozen_string_literal: true

# A Rust panic is caught in the GVL-free trampoline and raised once the GVL is back.
RSpec.describe "a panic in the Rust core" do
  it "arrives as Ferrolock::Error, and the process carries on" do
    expect { Ferrolock::Native.panic_for_test }
      .to raise_error(Ferrolock::Error, /internal error in ferrolock: deliberate panic/)
    expect(Ferrolock.client.ping).to eq("PONG")
  end
end
