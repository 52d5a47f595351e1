# frozen_string_literal: true

require "logger"
require "securerandom"
require "stringio"

# The FairTenant middleware never fails a push: a tenant that cannot name a Redis key (over
# MAX_NAME_BYTES, not UTF-8) is pushed unthrottled with a warning; queue_for itself refuses it.
RSpec.describe Ferrolock::FairTenant::ClientMiddleware, "with a tenant that cannot name a key" do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:log) { StringIO.new }
  let(:rules) { [{ "queue" => "slow", "threshold" => 1, "per" => 60 }] }

  before do
    Ferrolock.configure { |c| c.logger = Logger.new(log) }
    Ferrolock::FairTenant.reset!
  end

  after { Ferrolock.reset_config! }

  def push(tenant)
    job = { "class" => "FtUnusableTenantJob", "args" => [], "jid" => SecureRandom.hex(12), "queue" => "default",
            "fair_tenant_queues" => rules, "fair_tenant" => tenant }
    result = described_class.new.call("FtUnusableTenantJob", job, "default", nil) { :pushed }
    [result, job]
  end

  it "pushes it unchanged, logged, and writes nothing" do
    ["x" * (Ferrolock::MAX_NAME_BYTES + 1), (+"\xFF").force_encoding(Encoding::UTF_8)].each do |tenant|
      3.times do
        result, job = push(tenant)
        expect([result, job["queue"]]).to eq([:pushed, "default"])
      end
      expect(redis.keys("*{ft:FtUnusableTenantJob:*")).to eq([])
    end
    expect(log.string.scan("pushed unthrottled").size).to eq(6)
    expect(log.string).to include("tenant must be at most 1024 bytes", "tenant must be valid UTF-8")
  end

  it "still reroutes a tenant of exactly MAX_NAME_BYTES" do
    tenant = "y" * Ferrolock::MAX_NAME_BYTES
    routed = Array.new(3) { push(tenant).last["queue"] }
    expect(routed).to eq(%w[default slow slow])
  end

  it "is refused by queue_for, naming the argument" do
    expect do
      Ferrolock::FairTenant.queue_for(rules, job_class: "J", tenant: "x" * 1025, jid: "j", queue: "default")
    end.to raise_error(ArgumentError, "tenant must be at most 1024 bytes, got 1025 bytes")
  end
end
