# frozen_string_literal: true

require_relative "support/redis_sentinel"

# A Sentinel-managed primary (spec/support/redis_sentinel.rb: a primary, a replica, 3 sentinels
# requiring a password): ferrolock finds the primary through the sentinels and follows it through
# a SENTINEL FAILOVER and a kill -9.
RSpec.describe "Redis Sentinel" do
  password = "sentinel-secret"
  setup = nil

  before(:context) { setup = FerrolockTest::RedisSentinel.new(password: password).start }
  after(:context) { setup&.destroy }

  # One sentinel as a URL, the others as {host:, port:} hashes; their password given apart.
  def sentinel_client(**options)
    first, *rest = sentinel.sentinels
    Ferrolock::Client.new(name: FerrolockTest::RedisSentinel::NAME,
                          sentinels: ["redis://127.0.0.1:#{first.port}",
                                      *rest.map { |s| { host: "127.0.0.1", port: s.port } }],
                          **options)
  end

  let(:sentinel) { setup }
  let(:client) { sentinel_client(sentinel_password: password) }

  def lock_keys(server, name)
    server.redis.call("KEYS", "ferrolock:{#{name}}:*")
  end

  # Takes `name` in a loop in 4 threads while the block runs and until 20 more sections are done
  # after it; returns [sections that began while another was inside, errors raised].
  def lock_loop_while(name)
    stop = false
    sections = 0
    errors = []
    inside = 0
    overlaps = 0
    guard = Mutex.new
    threads = Array.new(4) do
      Thread.new do
        until stop
          begin
            # A short lease: a release cut off by the switch leaves the lock held until it expires.
            Ferrolock::DistMutex.new(name, lease: 3, client: client).synchronize(timeout: 30) do
              guard.synchronize { overlaps += 1 if (inside += 1) > 1 }
              sleep 0.005
              guard.synchronize { inside -= 1 }
            end
            guard.synchronize { sections += 1 }
          rescue StandardError => e
            guard.synchronize { errors << "#{e.class}: #{e.message}" }
            sleep 0.05
          end
        end
      end
    end
    wait_until(timeout: 30) { sections >= 20 }
    yield
    done = sections
    wait_until(timeout: 60, interval: 0.05) { sections >= done + 20 } # work resumes on the new primary
    stop = true
    threads.each(&:join)
    [overlaps, errors]
  ensure
    stop = true
    threads&.each(&:join)
  end

  # Replication is asynchronous: a grant the old primary took after (SENTINEL FAILOVER) or just
  # before (kill -9) the switch can be lost with it, and then a second holder can enter. That is
  # never silent: the holder whose lease was lost gets LockLost (or a ConnectionError) at release.
  # So: no other errors, and every overlap matched by such a report.
  def expect_only_reported_losses(overlaps, errors)
    kinds = errors.map { |e| e.split(": ").first }
    expect(kinds.uniq - ["Ferrolock::ConnectionError", "Ferrolock::LockLost"]).to eq([]), errors.join("\n")
    expect(overlaps).to be <= kinds.size
  end

  it "finds the primary and says so without passwords" do
    expect(client.ping).to eq("PONG")
    Ferrolock::DistMutex.new("found", client: client).synchronize do
      expect(lock_keys(sentinel.primary, "found")).to include("ferrolock:{found}:lock")
    end
    first = sentinel.sentinels.first.port
    expect(client.inspect).to include(%(sentinel primary "mymaster" via redis://127.0.0.1:#{first}, ))
    in_url = "redis://:#{password}@127.0.0.1:#{sentinel.sentinels[0].port}"
    secret = Ferrolock::Client.new(name: "mymaster", sentinels: [in_url])
    expect(secret.inspect).not_to include(password)
    expect(secret.ping).to eq("PONG")
  end

  it "authenticates to the sentinels: refused without their password" do
    expect { sentinel_client.ping }.to raise_error(Ferrolock::Error)
    expect { sentinel_client(sentinel_password: "wrong").ping }.to raise_error(Ferrolock::Error)
    expect(sentinel_client(sentinel_password: password).ping).to eq("PONG")
  end

  it "follows a SENTINEL FAILOVER to the new primary; a grant lost with the old one is reported, never silent" do
    old = sentinel.primary
    overlaps, errors = lock_loop_while("failover") { expect(sentinel.failover).not_to eq(old) }
    Ferrolock::DistMutex.new("after-failover", client: client).synchronize do
      expect(lock_keys(sentinel.primary, "after-failover")).to include("ferrolock:{after-failover}:lock")
    end
    expect_only_reported_losses(overlaps, errors)
  end

  it "follows the replica promoted after the primary is killed (kill -9); losses reported, never silent" do
    old = sentinel.primary
    overlaps, errors = lock_loop_while("killed") { expect(sentinel.kill_primary).not_to eq(old) }
    expect_only_reported_losses(overlaps, errors)
    Ferrolock::DistMutex.new("after-kill", client: client).synchronize do
      expect(lock_keys(sentinel.primary, "after-kill")).to include("ferrolock:{after-kill}:lock")
    end
  end
end
