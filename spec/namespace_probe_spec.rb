# frozen_string_literal: true

require "spec_helper"
require "ferrolock/admin"
require "ferrolock/admin/namespace_probe"

# Which other namespaces hold ferrolock's keys: the `ferrolock` command's hint when it finds nothing.
RSpec.describe Ferrolock::Admin::NamespaceProbe do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:probe) { described_class.new(Ferrolock::Client.new(namespace: "ferrolock")) }

  def scan_calls
    redis.info("commandstats").fetch("scan", {}).fetch("calls", "0").to_i
  end

  it "names the other namespaces, the one with the most keys first, from keys shaped like ferrolock's only" do
    held = Ferrolock::DistMutex.new("report:1", client: Ferrolock::Client.new(namespace: "myapp"))
    held.lock
    redis.set("myapp:{report:2}:fence", "1")
    redis.set("billing:eu:{invoice}:lock", "x") # a namespace holding ":"
    redis.set("ferrolock:{mine}:lock", "x")     # its own: never named
    redis.set("sidekiq:queue:default", "x")     # not ferrolock's shape
    redis.set("other:{tag}", "x")               # a hash tag without a part
    redis.set("upper:{tag}:X", "x")             # a part that is not ferrolock's
    expect(probe.others).to eq(["myapp", "billing:eu"])
    expect(probe.others(limit: 1)).to eq(["myapp"])
  ensure
    held&.unlock
  end

  it "names nothing when only its own namespace holds keys" do
    redis.set("ferrolock:{mine}:lock", "x")
    expect(probe.others).to eq([])
  end

  it "scans a bounded sample of a big keyspace: at most MAX_KEYS / COUNT SCAN calls, never KEYS" do
    30.times { |batch| redis.mset(*Array.new(1000) { |i| ["noise:#{batch}:#{i}", "x"] }.flatten) }
    redis.set("far:{away}:lock", "x")
    redis.call("CONFIG", "RESETSTAT") # other examples may have sent KEYS to this server
    before = scan_calls
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    probe.others
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    calls = scan_calls - before
    expect(calls).to be_between(1, described_class::MAX_KEYS / described_class::COUNT)
    expect(elapsed).to be < described_class::MAX_SECONDS + 1.0
    expect(redis.info("commandstats")).not_to have_key("keys")
  end
end
