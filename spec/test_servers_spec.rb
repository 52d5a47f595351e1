# frozen_string_literal: true

require_relative "support/redis_sentinel"

# The suite's throwaway servers pick a free port, then bind it; in between, another suite running
# beside this one (bin/modern's lanes) can take it. Its server then answers on that port: in one CI
# run a sentinel that had failed to bind passed for started, and the setup never settled.
RSpec.describe "test servers whose port was taken before their bind", time_limit: 60 do
  let(:other) { FerrolockTest::RedisServer.new.start }

  after { other.destroy }

  it "a RedisServer moves to another port, not onto the server that took it" do
    server = FerrolockTest::RedisServer.new
    server.instance_variable_set(:@port, other.port)
    server.start
    expect(server.port).not_to eq(other.port)
    expect(server.redis.call("INFO", "server")[/^process_id:(\d+)/, 1]).to eq(server.pid.to_s)
  ensure
    server&.destroy
  end

  it "a sentinel moves to another port, and the setup settles" do
    setup = FerrolockTest::RedisSentinel.new
    setup.sentinels.first.instance_variable_set(:@port, other.port)
    setup.start
    expect(setup.sentinels.map(&:port)).not_to include(other.port)
    expect(setup.sentinels.map { |s| s.call("SENTINEL", "MYID") }.uniq.size).to eq(3)
  ensure
    setup&.destroy
  end
end
