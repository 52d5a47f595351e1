# frozen_string_literal: true

require "pathname"

RSpec.describe Ferrolock::Configuration do
  around do |example|
    names = %w[FERROLOCK_REDIS_URL REDIS_URL FERROLOCK_REPLY_SPIN FERROLOCK_NAMESPACE]
    saved = ENV.to_h.slice(*names)
    example.run
  ensure
    names.each { |name| ENV.delete(name) }
    ENV.update(saved)
    Ferrolock.reset_config!
  end

  subject(:config) { described_class.new }

  describe "redis_url default" do
    it "prefers FERROLOCK_REDIS_URL" do
      ENV["FERROLOCK_REDIS_URL"] = "redis://a:1/0"
      ENV["REDIS_URL"] = "redis://b:2/0"
      expect(config.redis_url).to eq("redis://a:1/0")
    end

    it "falls back to REDIS_URL, as Sidekiq does" do
      ENV.delete("FERROLOCK_REDIS_URL")
      ENV["REDIS_URL"] = "redis://b:2/0"
      expect(config.redis_url).to eq("redis://b:2/0")
    end

    it "is the local Redis when neither is set" do
      ENV.delete("FERROLOCK_REDIS_URL")
      ENV.delete("REDIS_URL")
      expect(config.redis_url).to eq("redis://127.0.0.1:6379/0")
    end
  end

  describe "redis_url = nil" do
    it "means the default chain, so `c.redis_url = ENV[\"FERROLOCK_REDIS_URL\"]` works with only REDIS_URL set" do
      ENV.delete("FERROLOCK_REDIS_URL")
      ENV["REDIS_URL"] = "redis://b:2/0"
      config.redis_url = "redis://elsewhere:1/0"
      config.redis_url = ENV.fetch("FERROLOCK_REDIS_URL", nil)
      expect(config.redis_url).to eq("redis://b:2/0")
      ENV.delete("REDIS_URL")
      config.redis_url = nil
      expect(config.redis_url).to eq("redis://127.0.0.1:6379/0")
    end

    it "still rejects other non-Strings and an empty String" do
      expect { config.redis_url = 42 }.to raise_error(TypeError, /redis_url/)
      expect { config.redis_url = "" }.to raise_error(ArgumentError, /redis_url/)
    end
  end

  describe "tls_ca_file" do
    it "defaults to nil (the system's roots) and takes a String or Pathname" do
      expect(config.tls_ca_file).to be_nil
      config.tls_ca_file = Pathname("/etc/ssl/private-ca.pem")
      expect(config.tls_ca_file).to eq("/etc/ssl/private-ca.pem")
      config.tls_ca_file = nil
      expect(config.tls_ca_file).to be_nil
    end

    it "names tls_ca_file for a bad value" do
      expect { config.tls_ca_file = 1 }.to raise_error(TypeError, /tls_ca_file/)
      expect { config.tls_ca_file = "" }.to raise_error(ArgumentError, /tls_ca_file/)
    end
  end

  it "has defaults for the other settings" do
    ENV.delete("FERROLOCK_REPLY_SPIN")
    ENV.delete("FERROLOCK_NAMESPACE")
    expect(config).to have_attributes(namespace: "ferrolock", connect_timeout: 1.0, read_timeout: 1.0,
                                      reply_spin: 0.0002)
  end

  describe "namespace default" do
    it "is FERROLOCK_NAMESPACE when set, so a process without the app's initializer finds its keys" do
      ENV["FERROLOCK_NAMESPACE"] = "myapp"
      expect(config.namespace).to eq("myapp")
      Ferrolock.reset_config!
      expect(Ferrolock.client.namespace).to eq("myapp")
      expect(Ferrolock::Client.new.key("report", "lock")).to eq("myapp:{report}:lock")
    end

    it "is \"ferrolock\" when FERROLOCK_NAMESPACE is unset or empty" do
      ENV["FERROLOCK_NAMESPACE"] = ""
      expect(config.namespace).to eq("ferrolock")
    end

    it "gives way to a namespace set in code; nil goes back to the default" do
      ENV["FERROLOCK_NAMESPACE"] = "from-env"
      config.namespace = "from-code"
      expect(config.namespace).to eq("from-code")
      config.namespace = nil
      expect(config.namespace).to eq("from-env")
    end

    it "names FERROLOCK_NAMESPACE when it is not a valid namespace" do
      ENV["FERROLOCK_NAMESPACE"] = "x" * (Ferrolock::MAX_NAME_BYTES + 1)
      expect { config }.to raise_error(ArgumentError, /FERROLOCK_NAMESPACE: namespace must be at most/)
    end
  end

  describe "reply_spin" do
    it "is read from FERROLOCK_REPLY_SPIN, so polling can be turned off without a code change" do
      ENV["FERROLOCK_REPLY_SPIN"] = "0"
      expect(config.reply_spin).to eq(0.0)
    end

    it "names FERROLOCK_REPLY_SPIN when it is not a number of seconds in range" do
      ENV["FERROLOCK_REPLY_SPIN"] = "fast"
      expect { config }.to raise_error(ArgumentError, /FERROLOCK_REPLY_SPIN/)
      ENV["FERROLOCK_REPLY_SPIN"] = "5"
      expect { config }.to raise_error(ArgumentError, /FERROLOCK_REPLY_SPIN.*between 0 and 0.01/)
    end

    it "is passed to the default client" do
      Ferrolock.configure { |c| c.reply_spin = 0.0002 }
      expect(Ferrolock.client.reply_spin).to be_within(1e-9).of(0.0002)
      expect(Ferrolock::Client.new(reply_spin: 0).reply_spin).to eq(0.0)
    end
  end

  it "logs at WARN to stderr by default" do
    hide_const("Sidekiq")
    expect(config.logger).to be_a(Logger).and(have_attributes(level: Logger::WARN))
  end

  it "uses Sidekiq's logger when Sidekiq is loaded" do
    require "sidekiq"
    expect(config.logger).to be(Sidekiq.logger)
  end

  describe "validation" do
    it "rejects an empty or non-String namespace, naming it" do
      expect { config.namespace = "" }.to raise_error(ArgumentError, /namespace/)
      expect { config.namespace = :jobs }.to raise_error(TypeError, /namespace/)
    end

    it "rejects a non-String redis_url, naming it" do
      expect { config.redis_url = :local }.to raise_error(TypeError, /redis_url/)
    end

    %i[connect_timeout read_timeout].each do |setting|
      it "rejects a #{setting} that is not a positive number, naming it" do
        expect { config.public_send("#{setting}=", 0) }.to raise_error(ArgumentError, /#{setting}/)
        expect { config.public_send("#{setting}=", -1.5) }.to raise_error(ArgumentError, /#{setting}/)
        expect { config.public_send("#{setting}=", "1") }.to raise_error(TypeError, /#{setting}/)
      end

      it "stores #{setting} as a Float" do
        config.public_send("#{setting}=", 2)
        expect(config.public_send(setting)).to eql(2.0)
      end
    end

    it "rejects a logger without #info and #warn, naming it" do
      expect { config.logger = Object.new }.to raise_error(TypeError, /logger/)
    end

    it "accepts any logger-like object" do
      logger = Logger.new(File::NULL)
      config.logger = logger
      expect(config.logger).to be(logger)
    end
  end

  describe "Ferrolock.configure" do
    it "yields the global configuration and rebuilds the default client" do
      url = FerrolockTest.redis_server.url
      Ferrolock.configure do |c|
        c.redis_url = url
        c.namespace = "jobs"
      end
      expect(Ferrolock.config.namespace).to eq("jobs")
      expect(Ferrolock.client.namespace).to eq("jobs")
      expect(Ferrolock.client.redacted_url).to include(FerrolockTest.redis_server.port.to_s)
    end

    it "applies all of the block's settings or none: a bad one leaves the others and the client as they were" do
      url = FerrolockTest.redis_server.url
      Ferrolock.configure do |c|
        c.redis_url = url
        c.namespace = "ns1"
      end
      client = Ferrolock.client
      expect(client.namespace).to eq("ns1")
      expect do
        Ferrolock.configure do |c|
          c.namespace = "ns2"
          c.redis_url = "redis://127.0.0.1:1/0"
          c.read_timeout = -1
        end
      end.to raise_error(ArgumentError, /read_timeout/)
      expect([Ferrolock.config.namespace, Ferrolock.config.redis_url]).to eq(["ns1", url])
      expect(Ferrolock.client).to be(client)
      expect(Ferrolock.client.key("n", "lock")).to start_with("ns1:")
      # And the next good configure applies and rebuilds.
      expect(Ferrolock.configure { |c| c.namespace = "ns3" }).to be(Ferrolock.config)
      expect(Ferrolock.client.namespace).to eq("ns3")
    end

    it "memoizes the default client across threads" do
      clients = Array.new(8) { Thread.new { Ferrolock.client } }.map(&:value)
      expect(clients.uniq.size).to eq(1)
    end

    it "forgets the default client on reset_client!" do
      first = Ferrolock.client
      Ferrolock.reset_client!
      expect(Ferrolock.client).not_to be(first)
    end
  end
end
