# frozen_string_literal: true

require "open3"
require "pathname"
require "socket"
require "tmpdir"

# rediss:// through our own rustls layer, against a redis-server with a TLS port and a
# certificate from a throwaway CA.
RSpec.describe "TLS (rediss://)" do
  before(:context) do
    @dir = Dir.mktmpdir("ferrolock-tls-")
    openssl = lambda do |*args|
      _, err, status = Open3.capture3("openssl", *args, chdir: @dir)
      raise "openssl #{args.first} failed: #{err}" unless status.success?
    end
    openssl.call("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
                 "-days", "2", "-subj", "/CN=ferrolock test CA")
    openssl.call("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
                 "-subj", "/CN=localhost")
    File.write(File.join(@dir, "ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl.call("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf")
    @port = FerrolockTest::RedisServer.free_port
    @pid = Process.spawn("redis-server", "--port", "0", "--tls-port", @port.to_s, "--bind", "127.0.0.1",
                         "--tls-cert-file", "server.crt", "--tls-key-file", "server.key",
                         "--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no",
                         "--save", "", "--appendonly", "no", chdir: @dir, out: File::NULL, err: File::NULL)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    begin
      TCPSocket.new("127.0.0.1", @port).close
    rescue SystemCallError
      raise "TLS redis-server did not start" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
      retry
    end
  end

  after(:context) do
    Process.kill("KILL", @pid)
    Process.wait(@pid)
    FileUtils.rm_rf(@dir)
  end

  let(:url) { "rediss://localhost:#{@port}/0" }

  it "talks to Redis over TLS when the server's CA is trusted" do
    client = Ferrolock::Client.new(url: url, tls_ca_file: File.join(@dir, "ca.crt"))
    expect(client.ping).to eq("PONG")
    m = Ferrolock::DistMutex.new("over-tls", client: client)
    expect(m.synchronize { m.fencing_token }).to be_a(Integer).and be_positive
  end

  it "trusts the CA set with Ferrolock.configure for the default client" do
    Ferrolock.configure do |c|
      c.redis_url = url
      c.tls_ca_file = Pathname(File.join(@dir, "ca.crt"))
    end
    expect(Ferrolock.client.ping).to eq("PONG")
    expect(Ferrolock::DistMutex.new("over-tls-default").synchronize { :ran }).to eq(:ran)
  ensure
    Ferrolock.reset_config!
  end

  it "refuses a certificate from an unknown CA with a ConnectionError naming host:port" do
    client = Ferrolock::Client.new(url: url)
    expect { client.ping }.to raise_error(Ferrolock::ConnectionError, /localhost:#{@port}.*certificate/)
  end

  it "names tls_ca_file when the file is unreadable" do
    expect { Ferrolock::Client.new(url: url, tls_ca_file: "/nonexistent/ca.crt") }
      .to raise_error(ArgumentError, /tls_ca_file/)
  end
end
