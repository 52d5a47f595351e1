# frozen_string_literal: true

# Choosing a Redis Cluster or Sentinel setup: Client.new's options, Ferrolock.configure and the
# environment, and every bad input refused with an error naming it. Building a client opens no
# connection, so nothing here needs a cluster (spec/cluster_spec.rb and spec/sentinel_spec.rb run
# the real ones).
RSpec.describe "Client topology options" do
  env_keys = Ferrolock::Configuration::TOPOLOGY_ENV.values

  around do |example|
    saved = env_keys.to_h { |key| [key, ENV.fetch(key, nil)] }
    example.run
  ensure
    saved.each { |key, value| value.nil? ? ENV.delete(key) : ENV.store(key, value) }
    Ferrolock.reset_config!
  end

  describe "Client.new" do
    it "takes cluster seeds as URLs and {host:, port:} hashes, and shows them without passwords" do
      client = Ferrolock::Client.new(cluster: ["redis://:pw@10.0.0.1:7000",
                                               { host: "10.0.0.2", port: 7001, username: "app", password: "p w" },
                                               { "host" => "10.0.0.3" }])
      expect(client.redacted_url)
        .to eq("cluster redis://:***@10.0.0.1:7000, redis://app:***@10.0.0.2:7001, redis://10.0.0.3:6379")
      expect(client.inspect).to eq(%(#<Ferrolock::Client #{client.redacted_url} namespace="ferrolock">))
    end

    it "takes sentinels with the primary's name, credentials and db" do
      client = Ferrolock::Client.new(name: "mymaster", sentinels: ["redis://:s@10.0.0.1:26379", { host: "10.0.0.2" }],
                                     sentinel_password: "s", username: "u", password: "p", db: 3)
      expect(client.redacted_url)
        .to eq(%(sentinel primary "mymaster" via redis://:***@10.0.0.1:26379, redis://10.0.0.2:26379))
      expect(client.inspect).not_to match(/\bs\b.*@|"p"/)
    end

    {
      { cluster: [] } => [ArgumentError, "cluster must not be empty"],
      { cluster: "redis://10.0.0.1:7000" } => [TypeError, "cluster must be an Array"],
      { cluster: [7000] } => [TypeError, "cluster[0] must be a redis:// URL String or a {host:, port:} Hash"],
      { cluster: ["10.0.0.1:7000"] } => [ArgumentError, "cluster[0] must be a redis:// or rediss:// URL"],
      { cluster: ["redis://10.0.0.1:99999"] } => [ArgumentError, "cluster[0]: url: cannot parse"],
      { cluster: ["unix:///tmp/redis.sock"] } => [ArgumentError, "cluster[0] must be a redis:// or rediss:// URL"],
      { cluster: [{ port: 7000 }] } => [TypeError, "cluster[0][:host] must be a String"],
      { cluster: [{ host: "h", port: "7000" }] } => [TypeError, "cluster[0][:port] must be an Integer"],
      { cluster: [{ host: "h", port: 0 }] } => [ArgumentError, "cluster[0][:port] must be 1..65535"],
      { cluster: [{ host: "h", db: 1 }] } => [ArgumentError, "cluster[0] has unknown key db"],
      { cluster: [{ host: "h", ssl: "yes" }] } => [TypeError, "cluster[0][:ssl] must be true or false"],
      { cluster: ["redis://h:1"],
        sentinels: ["redis://h:2"] } => [ArgumentError, "give only one of url:, cluster:, sentinels:"],
      { url: "redis://h:1",
        cluster: ["redis://h:1"] } => [ArgumentError, "give only one of url:, cluster:, sentinels:"],
      { cluster: ["redis://h:1"], name: "m" } => [ArgumentError, "name: is only used with sentinels:"],
      { password: "p" } => [ArgumentError, "password: is only used with sentinels:"],
      { sentinels: ["redis://h:26379"] } => [ArgumentError, "name (the primary's name in the sentinels) is required"],
      { sentinels: ["redis://h:26379"], name: "" } => [ArgumentError, "name must not be empty"],
      { sentinels: [], name: "m" } => [ArgumentError, "sentinels must not be empty"],
      { sentinels: ["redis://h:26379"], name: "m", db: -1 } => [ArgumentError, "db must be zero or more"],
      { sentinels: ["redis://h:26379"], name: "m",
        sentinel_password: 1 } => [TypeError, "sentinel_password must be a String"]
    }.each do |options, (error, message)|
      it "refuses #{options.inspect} with #{error}" do
        expect { Ferrolock::Client.new(**options) }.to raise_error(error, /\A#{Regexp.escape(message)}/)
      end
    end
  end

  describe "Ferrolock.configure and the environment" do
    it "builds the default client for the configured cluster, and explicit options win" do
      Ferrolock.configure { |c| c.redis_cluster = ["redis://10.0.0.1:7000"] }
      expect(Ferrolock.client.redacted_url).to eq("cluster redis://10.0.0.1:7000")
      expect(Ferrolock::Client.new(url: "redis://10.0.0.9:6379").redacted_url).to eq("redis://10.0.0.9:6379")
    end

    it "builds the default client for the configured sentinels, naming the setting when one is bad" do
      Ferrolock.configure do |c|
        c.redis_sentinels = [{ host: "10.0.0.1" }]
        c.redis_sentinel_name = "mymaster"
        c.redis_db = 2
      end
      expect(Ferrolock.client.redacted_url).to eq(%(sentinel primary "mymaster" via redis://10.0.0.1:26379))
      Ferrolock.configure { |c| c.redis_sentinel_name = nil }
      expect do
        Ferrolock.client
      end.to raise_error(ArgumentError, /redis_sentinel_name .* is required with redis_sentinels/)
      expect { Ferrolock.config.redis_sentinels = [1] }.to raise_error(TypeError, /\Aredis_sentinels\[0\]/)
      expect { Ferrolock.config.redis_db = -1 }.to raise_error(ArgumentError, /\Aredis_db/)
    end

    it "refuses a cluster and sentinels both configured" do
      Ferrolock.configure do |c|
        c.redis_cluster = ["redis://10.0.0.1:7000"]
        c.redis_sentinels = ["redis://10.0.0.1:26379"]
      end
      expect do
        Ferrolock.client
      end.to raise_error(ArgumentError, "redis_cluster and redis_sentinels are both set: choose one")
    end

    it "reads FERROLOCK_REDIS_CLUSTER (commas, spaces) while redis_cluster is nil" do
      ENV["FERROLOCK_REDIS_CLUSTER"] = "redis://10.0.0.1:7000, redis://10.0.0.2:7000"
      Ferrolock.reset_config!
      expect(Ferrolock.config.redis_cluster).to eq(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
      expect(Ferrolock.client.redacted_url).to eq("cluster redis://10.0.0.1:7000, redis://10.0.0.2:7000")
    end

    it "reads the sentinel variables while their settings are nil" do
      ENV.update("FERROLOCK_REDIS_SENTINELS" => "redis://10.0.0.1:26379,redis://10.0.0.2:26379",
                 "FERROLOCK_REDIS_SENTINEL_NAME" => "cache", "FERROLOCK_REDIS_SENTINEL_PASSWORD" => "s",
                 "FERROLOCK_REDIS_DB" => "4")
      Ferrolock.reset_config!
      expect(Ferrolock.config.redis_sentinel_password).to eq("s")
      expect(Ferrolock.client.redacted_url)
        .to eq(%(sentinel primary "cache" via redis://10.0.0.1:26379, redis://10.0.0.2:26379))
      ENV["FERROLOCK_REDIS_DB"] = "four"
      expect { Ferrolock.config.redis_db }.to raise_error(ArgumentError, /\AFERROLOCK_REDIS_DB: /)
    end
  end
end
