# frozen_string_literal: true

RSpec.describe Ferrolock::Client do
  let(:server) { FerrolockTest.redis_server }
  let(:client) { described_class.new(url: server.url) }

  describe "#ping and #call" do
    it "round-trips PING" do
      expect(client.ping).to eq("PONG")
      expect(client.call("PING")).to eq("PONG")
    end

    it "maps replies to Ruby values" do
      expect(client.call("SET", "greeting", "hello")).to eq("OK")
      expect(client.call("GET", "greeting")).to eq("hello")
      expect(client.call("GET", "missing")).to be_nil
      expect(client.call("INCRBY", "count", 41)).to eq(41)
      expect(client.call("INCRBYFLOAT", "ratio", 1.5)).to eq("1.5")
      client.call("RPUSH", "list", "a", "b")
      expect(client.call("LRANGE", "list", 0, -1)).to eq(%w[a b])
    end

    it "returns binary-safe strings" do
      value = "\x00\xFFbinary".b
      client.call("SET", "blob", value)
      expect(client.call("GET", "blob").b).to eq(value)
    end

    it "raises Ferrolock::Error for a Redis error reply" do
      client.call("SET", "text", "abc")
      expect { client.call("INCR", "text") }.to raise_error(Ferrolock::Error, /not an integer/)
    end

    it "raises TypeError for an argument Redis cannot take" do
      expect { client.call("SET", "k", Object.new) }.to raise_error(TypeError)
    end

    it "is usable from another process through the same configuration" do
      client.call("SET", "from-parent", "1")
      out = run_ruby!(<<~RUBY)
        require "ferrolock"
        c = Ferrolock::Client.new(url: ENV.fetch("REDIS_URL"))
        print c.call("GET", "from-parent")
      RUBY
      expect(out).to eq("1")
    end
  end

  describe "#key, #namespace" do
    it "builds hash-tagged keys under the namespace" do
      client = described_class.new(url: server.url, namespace: "jobs")
      expect(client.namespace).to eq("jobs")
      expect(client.key("report", "lock")).to eq("jobs:{report}:lock")
    end

    it "defaults to the configured namespace" do
      expect(client.namespace).to eq("ferrolock")
    end
  end

  it "exposes the native client for primitives" do
    expect(client.native).to be_a(Ferrolock::Native::Client)
  end

  it "serves 16 threads at once with the right answer to each call" do
    threads = Array.new(16) do |t|
      Thread.new do
        Array.new(200) do |i|
          echo = client.call("ECHO", "t#{t}-#{i}")
          raise "thread #{t} got #{echo.inspect} for t#{t}-#{i}" unless echo == "t#{t}-#{i}"

          client.call("INCR", "counter")
        end
      end
    end
    counts = threads.flat_map(&:value)
    expect(counts.size).to eq(3200)
    expect(counts.uniq.size).to eq(3200)
    expect(server.redis.get("counter")).to eq("3200")
  end

  describe "reply_spin" do
    # Polling for replies changes when a thread looks at its socket, never what it reads.
    [0, Ferrolock::Configuration::DEFAULT_REPLY_SPIN, Ferrolock::Configuration::MAX_REPLY_SPIN].each do |spin|
      it "gives 8 threads the right answers with reply_spin #{spin}" do
        spinning = described_class.new(url: server.url, reply_spin: spin)
        threads = Array.new(8) do |t|
          Thread.new { Array.new(100) { |i| spinning.call("ECHO", "#{t}-#{i}") == "#{t}-#{i}" } }
        end
        expect(threads.flat_map(&:value)).to all(be(true))
      end
    end

    it "still times out on a hung Redis, and works again when it resumes" do
      hung = FerrolockTest::RedisServer.new.start
      spinning = described_class.new(url: hung.url, read_timeout: 0.3,
                                     reply_spin: Ferrolock::Configuration::MAX_REPLY_SPIN)
      spinning.ping
      hung.pause
      took = elapsed { expect { spinning.ping }.to raise_error(Ferrolock::ConnectionError, /127\.0\.0\.1/) }
      expect(took).to be_between(0.25, 1.0)
      hung.resume
      expect(spinning.ping).to eq("PONG")
    ensure
      hung&.destroy
    end

    it "defaults to the configured value and rejects bad values, naming reply_spin" do
      expect(Ferrolock.config.reply_spin).to eq(Ferrolock::Configuration::DEFAULT_REPLY_SPIN)
      expect { described_class.new(reply_spin: "fast") }.to raise_error(TypeError, /reply_spin/)
      expect { described_class.new(reply_spin: -1) }.to raise_error(ArgumentError, /reply_spin/)
      expect { described_class.new(reply_spin: 1) }.to raise_error(ArgumentError, /reply_spin/)
      expect { Ferrolock.config.reply_spin = nil }.to raise_error(TypeError, /reply_spin/)
    end
  end

  describe "arguments" do
    it "rejects an unknown keyword, naming it" do
      expect { described_class.new(url: server.url, pool: 5) }.to raise_error(ArgumentError, /pool/)
    end

    it "rejects wrong types, naming the argument" do
      expect { described_class.new(url: 6379) }.to raise_error(TypeError, /url/)
      expect { described_class.new(namespace: nil) }.to raise_error(TypeError, /namespace/)
      expect { described_class.new(read_timeout: "1") }.to raise_error(TypeError, /read_timeout/)
      expect { described_class.new(connect_timeout: 0) }.to raise_error(ArgumentError, /connect_timeout/)
      expect { described_class.new(tls_ca_file: 5) }.to raise_error(TypeError, /tls_ca_file/)
    end

    ["http://example.com", "redis://host:notaport", "redis://127.0.0.1:6379/notadb", "not a url"].each do |url|
      it "rejects the URL #{url.inspect} with an ArgumentError naming url" do
        expect { described_class.new(url: url).ping }.to raise_error(ArgumentError, /url/)
      end
    end
  end

  describe "passwords" do
    let(:secret) { "s3cr3t-#{rand(1_000_000)}" }
    let(:url) { "redis://:#{secret}@127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0" }

    it "never shows the password in inspect, to_s or redacted_url" do
      client = described_class.new(url: url)
      [client.inspect, client.to_s, client.redacted_url].each do |text|
        expect(text).not_to include(secret)
      end
      expect(client.redacted_url).to include("***")
    end

    it "never shows the password in a connection error" do
      error = begin
        described_class.new(url: url, connect_timeout: 0.5).ping
      rescue Ferrolock::Error => e
        e
      end
      expect(error).to be_a(Ferrolock::ConnectionError)
      expect(error.message).not_to include(secret)
    end
  end

  describe "URLs" do
    it "honours the db index" do
      described_class.new(url: server.url(db: 3)).call("SET", "in-db-3", "yes")
      expect(server.redis(db: 3).get("in-db-3")).to eq("yes")
      expect(server.redis.get("in-db-3")).to be_nil
    end

    it "connects over a unix socket" do
      unix = FerrolockTest::RedisServer.new(unixsocket: true).start
      client = described_class.new(url: "unix://#{unix.socket_path}")
      expect(client.ping).to eq("PONG")
      client.call("SET", "over-unix", "1")
      expect(unix.redis.get("over-unix")).to eq("1")
    ensure
      unix&.destroy
    end

    context "with an ACL user" do
      before do
        server.redis.call("ACL", "SETUSER", "worker", "on", ">letmein", "~*", "&*", "+@all")
      end

      after { server.redis.call("ACL", "DELUSER", "worker") }

      it "authenticates with username and password" do
        client = described_class.new(url: "redis://worker:letmein@#{server.host}:#{server.port}/0")
        expect(client.call("ACL", "WHOAMI")).to eq("worker")
      end

      it "fails clearly on a wrong password without showing it" do
        client = described_class.new(url: "redis://worker:wr0ngpass@#{server.host}:#{server.port}/0")
        expect { client.ping }.to raise_error(Ferrolock::Error) { |e| expect(e.message).not_to include("wr0ngpass") }
      end
    end
  end

  # Valkey 9.1+ without its Lua engine, EVAL/EVALSHA renamed away, or an ACL user without +@scripting:
  # named with what is missing, at Sidekiq's boot (Railtie) and at the first lock, never a raw reply.
  describe "a server that will not run Lua scripts" do
    after { @servers&.each(&:destroy) }

    def server(*args) = ((@servers ||= []) << FerrolockTest::RedisServer.new(extra_args: args).start).last

    it "check_scripting! and the first lock name the server and what is missing (commands renamed away)" do
      renamed = server("--rename-command", "EVAL", "", "--rename-command", "EVALSHA", "")
      client = described_class.new(url: renamed.url)
      missing = /Redis at 127\.0\.0\.1:#{renamed.port} cannot run Lua scripts.*unknown command.*must not be renamed/i
      expect { client.check_scripting! }.to raise_error(Ferrolock::Error, missing)
      mutex = Ferrolock::DistMutex.new("scriptless", client: client)
      expect { mutex.try_lock }.to raise_error(Ferrolock::Error, missing)
      expect(described_class.new(url: FerrolockTest.redis_server.url).check_scripting!).to be(true)
    end

    it "names an ACL user without +@scripting, and not its password" do
      FerrolockTest.redis_server.redis.call("ACL", "SETUSER", "noscript", "on", ">hunter2", "~*", "+@all",
                                            "-@scripting")
      url = FerrolockTest.redis_server.url.sub("redis://", "redis://noscript:hunter2@")
      client = described_class.new(url: url)
      expect { client.check_scripting! }.to raise_error(Ferrolock::Error, /cannot run Lua scripts.*\+@scripting/) do |e|
        expect(e.message).not_to include("hunter2")
      end
    ensure
      FerrolockTest.redis_server.redis.call("ACL", "DELUSER", "noscript")
    end
  end

  describe "when Redis is unavailable" do
    let(:down) { FerrolockTest::RedisServer.new.start }

    after { down.destroy }

    it "raises ConnectionError naming host:port when the server is stopped" do
      client = described_class.new(url: down.url, connect_timeout: 0.5, read_timeout: 0.5)
      client.ping
      down.stop
      took = elapsed do
        expect { client.ping }.to raise_error(Ferrolock::ConnectionError, /127\.0\.0\.1:#{down.port}/)
      end
      expect(took).to be < 1.0
    end

    it "reconnects once the server is back" do
      client = described_class.new(url: down.url, connect_timeout: 0.5, read_timeout: 0.5)
      client.ping
      down.restart
      expect(wait_until { client.ping == "PONG" rescue false }).to be(true) # rubocop:disable Style/RescueModifier
    end

    it "raises ConnectionError within read_timeout when the server does not answer" do
      client = described_class.new(url: down.url, connect_timeout: 0.5, read_timeout: 0.5)
      client.ping
      down.pause
      took = elapsed do
        expect { client.call("PING") }.to raise_error(Ferrolock::ConnectionError, /127\.0\.0\.1:#{down.port}/)
      end
      expect(took).to be_between(0.4, 1.2)
    ensure
      down.resume
    end

    it "raises ConnectionError within read_timeout when a paused server accepts but never answers" do
      down.pause
      client = described_class.new(url: down.url, connect_timeout: 0.5, read_timeout: 0.5)
      took = elapsed { expect { client.ping }.to raise_error(Ferrolock::ConnectionError) }
      expect(took).to be < 1.5
    ensure
      down.resume
    end
  end
end
