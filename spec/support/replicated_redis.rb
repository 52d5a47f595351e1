# frozen_string_literal: true

# A primary of its own with one synced replica, for specs of min_replicas_acked (the shared spec
# server stays replica-free): @primary and @replica (FerrolockTest::RedisServer), the replica
# resumed after each example (some pause it).
RSpec.shared_context "with a primary and one replica" do
  before(:all) do
    @primary = FerrolockTest::RedisServer.new.start
    @replica = FerrolockTest::RedisServer.new(extra_args: ["--replicaof", "127.0.0.1", @primary.port.to_s]).start
    deadline = Ferrolock.monotonic + 30
    until @replica.redis.info("replication")["master_link_status"] == "up"
      raise "the replica never synced" if Ferrolock.monotonic > deadline

      sleep 0.05
    end
  end

  after(:all) do
    @replica&.destroy
    @primary&.destroy
  end

  after { @replica.resume }
end
