# frozen_string_literal: true

require "spec_helper"
require "logger"
require "stringio"

# At first use a client reads Redis' maxmemory-policy once and warns when Redis may evict
# ferrolock's keys (anything but noeviction), the way Sidekiq warns at boot.
RSpec.describe "maxmemory-policy warning" do
  let(:log) { StringIO.new }

  before do
    @previous_logger = Ferrolock.config.instance_variable_get(:@logger)
    Ferrolock.config.logger = Logger.new(log).tap { |l| l.level = Logger::DEBUG }
  end

  after do
    Ferrolock.config.instance_variable_set(:@logger, @previous_logger)
    @servers&.each(&:destroy)
  end

  def server(*args)
    (@servers ||= []) << FerrolockTest::RedisServer.new(extra_args: args).start
    @servers.last
  end

  # Uses the client the way an app does (primitives, commands) and waits for the check.
  def use(client)
    Ferrolock::DistMutex.new("evict-a", client: client).synchronize { :ok }
    Ferrolock::DistMutex.new("evict-b", client: client).synchronize { :ok }
    client.ping
    client.eviction_check.join(10)
  end

  def warnings
    log.string.lines.grep(/WARN.*maxmemory-policy/)
  end

  it "warns once per client when Redis may evict keys (allkeys-lru)" do
    lru = server("--maxmemory-policy", "allkeys-lru")
    client = Ferrolock::Client.new(url: lru.url)
    expect(use(client)).to be(true)
    use(client)
    expect(warnings.size).to eq(1)
    expect(warnings.first).to include("allkeys-lru", "noeviction", lru.url)
    # Another client (another pool) warns for itself, once.
    use(Ferrolock::Client.new(url: lru.url))
    expect(warnings.size).to eq(2)
  end

  it "warns for volatile-* policies too: every ferrolock key has a TTL" do
    client = Ferrolock::Client.new(url: server("--maxmemory-policy", "volatile-ttl").url)
    use(client)
    expect(warnings.size).to eq(1)
  end

  it "says nothing under the default noeviction" do
    client = Ferrolock::Client.new(url: server.url)
    expect(use(client)).to be(true)
    expect(log.string).not_to include("maxmemory-policy")
  end

  it "only logs at debug level when CONFIG is refused (ACL, managed Redis)" do
    acl = server("--maxmemory-policy", "allkeys-lru")
    acl.redis.call("ACL", "SETUSER", "default", "-config")
    client = Ferrolock::Client.new(url: acl.url)
    expect(use(client)).to be(true)
    expect(warnings).to be_empty
    expect(log.string).to match(/DEBUG.*refused CONFIG GET maxmemory-policy/)
  end

  it "never raises when Redis is down at boot" do
    down = server
    down.stop
    client = Ferrolock::Client.new(url: down.url, connect_timeout: 0.2)
    expect { Ferrolock::DistMutex.new("evict-down", client: client) }.not_to raise_error
    expect(client.eviction_check.join(10)).to be(false)
    expect(warnings).to be_empty
    expect(log.string).to match(/DEBUG.*could not read Redis' maxmemory-policy/)
  end
end
