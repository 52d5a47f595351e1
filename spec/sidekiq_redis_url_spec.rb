# frozen_string_literal: true

require "sidekiq"

# `redis_url: :sidekiq` (Client.new(url: :sidekiq) or c.redis_url = :sidekiq) reuses Sidekiq's own
# Redis settings, password and db included, on Sidekiq 6.4 (redis-rb) and 7 (redis-client).
RSpec.describe "redis_url :sidekiq" do
  let(:compat) { Ferrolock::Sidekiq::Compat }

  it "talks to the Redis Sidekiq uses" do
    client = Ferrolock::Client.new(url: :sidekiq)
    expect(client.ping).to eq("PONG")
    expect(client.redacted_url).to eq(FerrolockTest.redis_server.url)
    ::Sidekiq.redis { |conn| conn.call("SET", "sidekiq:probe", "seen") }
    expect(client.call("GET", "sidekiq:probe")).to eq("seen")
  end

  it "is accepted by Ferrolock.configure and resolved when the client is built" do
    config = Ferrolock::Configuration.new
    config.redis_url = :sidekiq
    expect(config.redis_url).to eq(:sidekiq)
    expect { config.redis_url = :other }.to raise_error(TypeError, /redis_url must be a String or :sidekiq/)
  end

  it "carries the password, user and db of Sidekiq's connection settings, with a password-protected server" do
    server = FerrolockTest::RedisServer.new.start
    server.redis.call("CONFIG", "SET", "requirepass", "p@ss word")
    url = "redis://:p%40ss%20word@127.0.0.1:#{server.port}/3"
    settings = if defined?(RedisClient) && ::Sidekiq.respond_to?(:default_configuration)
                 RedisClient.config(url: url)
               else
                 Redis.new(url: url)._client
               end
    built = compat.url_from(settings)
    client = Ferrolock::Client.new(url: built)
    client.call("SET", "k", "v")
    expect(client.redacted_url).not_to include("p@ss")
    expect(Redis.new(url: url).get("k")).to eq("v") # db 3 of the protected server
  ensure
    server&.destroy
  end

  it "writes unix sockets with their credentials in the query" do
    settings = Struct.new(:path, :db, :username, :password).new("/tmp/r.sock", 2, nil, "pw")
    expect(compat.url_from(settings)).to eq("unix:///tmp/r.sock?db=2&pass=pw")
  end
end
