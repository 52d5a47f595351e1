# frozen_string_literal: true

require "socket"
require "tmpdir"
require_relative "support/testing_scenarios"

# Ferrolock::Testing's switches (fake!, disable!, real!, their block forms, reset!), disable!'s
# pass-through, and the promise that fake and disabled modes never open a Redis connection.
RSpec.describe Ferrolock::Testing do
  let(:redis) { FerrolockTest.redis_server.redis }

  around { |example| FerrolockTest::TestingModes.around(example, :fake) }

  describe "switching" do
    it "answers the query methods for each mode" do
      answers = %w[fake! disable! real!].to_h do |switch|
        described_class.public_send(switch)
        [switch, [described_class.mode, described_class.fake?, described_class.disabled?, described_class.real?]]
      end
      expect(answers).to eq("fake!" => [:fake, true, false, false], "disable!" => [:disabled, false, true, false],
                            "real!" => [:real, false, false, true])
    end

    it "brings the previous mode back after a block, also when it raises, and nests" do
      described_class.fake!
      inner = described_class.disable! { described_class.real! { described_class.mode } }
      after_block = described_class.mode
      expect { described_class.real! { raise "boom" } }.to raise_error("boom")
      expect([inner, after_block, described_class.mode]).to eq(%i[real fake fake])
    end

    it "picks a mode by name, and names a bad one" do
      modes = %i[fake disable disabled real].map { |name| described_class.use(name) { described_class.mode } }
      expect(modes).to eq(%i[fake disabled disabled real])
      expect { described_class.use(:mock) }
        .to raise_error(ArgumentError, /mode must be :fake, :disable or :real, got :mock/)
    end

    it "reads the mode at each call: a limiter made against Redis counts in memory once fake, and back" do
      limiter = described_class.real! { Ferrolock::ConcurrentLimiter.new("constant", 1) }
      fake_keys = limiter.within_limit { redis.keys("ferrolock:*") }
      real_keys = described_class.real! { limiter.within_limit { redis.keys("ferrolock:*") } }
      expect([fake_keys, real_keys.grep(/constant/).empty?]).to eq([[], false])
    end

    it "releases a hold in the backend that granted it, whatever the mode is by then" do
      mutex = Ferrolock::DistMutex.new("crossing")
      mutex.lock
      described_class.real! { mutex.unlock }
      expect([mutex.locked?, redis.keys("ferrolock:*")]).to eq([false, []])
    end
  end

  describe ".reset!" do
    it "forgets held locks and wakes their waiters; the holder's unlock then reports the lock lost" do
      mutex = Ferrolock::DistMutex.new("stale")
      held = Queue.new
      release = Queue.new
      holder = Thread.new do
        mutex.lock
        held << true
        release.pop
        mutex.unlock
      rescue Ferrolock::LockLost => e
        e
      end
      held.pop
      waiter = Thread.new { elapsed { Ferrolock::DistMutex.new("stale").synchronize(wait_timeout: 5) { :ran } } }
      sleep 0.2
      described_class.reset!
      waited = waiter.value
      release << true
      expect([waited < 1.5, holder.value]).to match([true, an_instance_of(Ferrolock::LockLost)])
    end

    it "forgets counts and markers" do
      limiter = Ferrolock::RateLimiter.window("reset", 1, :hour, wait_timeout: 0)
      lock = Ferrolock::Shoryuken::MessageLock.new
      before = [limiter.within_limit { :ok }, lock.process("q", "m") { :ok }]
      described_class.reset!
      expect(before + [limiter.within_limit { :again }, lock.process("q", "m") { :again }]).to eq(%i[ok ran again ran])
    end
  end

  describe ".disable!" do
    around { |example| described_class.disable! { example.run } }

    it "grants every lock, slot and call at once" do
      mutex = Ferrolock::DistMutex.new("open")
      limiter = Ferrolock::ConcurrentLimiter.new("open", 1, wait_timeout: 0)
      rate = Ferrolock::RateLimiter.window("open", 1, :hour, wait_timeout: 0)
      dual = Ferrolock::DualLock.new("open", wait_timeout: 0)
      nested = mutex.synchronize do
        other = Ferrolock::DistMutex.new("open")
        limiter.within_limit do
          [other.synchronize { mutex.locked? }, limiter.within_limit { :in }, dual.run { dual.run { :inner } }]
        end
      end
      expect([nested, Array.new(3) { rate.within_limit { :ok } }]).to eq([[false, :in, true], %i[ok ok ok]])
      expect(redis.keys("*")).to eq([])
    end

    it "passes jobs through every middleware untouched" do
      jobs = {
        Ferrolock::Sidekiq::FairTenantMiddleware.new => [TestingModeTenantJob, { "class" => "TestingModeTenantJob",
                                                                                 "fair_tenant" => "acme" }],
        Ferrolock::Sidekiq::Unique::ClientMiddleware.new => [TestingModeUniqueJob,
                                                             { "class" => "TestingModeUniqueJob" }]
      }
      client_side = jobs.flat_map do |middleware, (klass, fields)|
        Array.new(4) do |i|
          job = fields.merge("jid" => "jid-#{i}", "args" => [1], "queue" => "default")
          untouched = Marshal.load(Marshal.dump(job))
          [middleware.call(klass, job, "default", nil) { :pushed }, job == untouched]
        end
      end
      server_side = [[Ferrolock::Sidekiq::Unique::ServerMiddleware.new, TestingModeUniqueJob],
                     [Ferrolock::Sidekiq::DualLock::Middleware.new, TestingModeDualJob]].map do |middleware, klass|
        job = { "class" => klass.name, "jid" => "j", "args" => [1], "queue" => "default" }
        middleware.call(klass.new, job, "default") { middleware.call(klass.new, job.dup, "default") { :inner } }
      end
      shoryuken = Ferrolock::Shoryuken::LockMiddleware.new(enabled: true)
      message = TestingModeMessage.new("m")
      copies = Array.new(2) { shoryuken.call(Object.new, "q", message) { :ran } }
      expect(client_side).to eq([[:pushed, true]] * 8)
      expect([server_side, copies]).to eq([%i[inner inner], %i[ran ran]])
      expect(redis.keys("*")).to eq([])
    end
  end

  describe "without Redis" do
    # A port where a listener counts connections and never answers: anything that connects shows.
    def count_connections
      server = TCPServer.new("127.0.0.1", 0)
      connections = 0
      acceptor = Thread.new do
        loop do
          server.accept
          connections += 1
        end
      rescue IOError
        nil
      end
      yield "redis://127.0.0.1:#{server.addr[1]}/0"
      sleep 0.2 # a background connection (the eviction check) would land now
      connections
    ensure
      server&.close
      acceptor&.join(1)
    end

    exercise = <<~RUBY
      require "sidekiq"
      require "ferrolock/testing"
      require "#{File.join(__dir__, "support", "testing_scenarios")}"
      Ferrolock::Backend.factory = Ferrolock::Testing
      mode = ARGV.fetch(0).to_sym
      Ferrolock::Testing.use(mode)
      puts "mode \#{Ferrolock::Testing.mode}"
      m = Ferrolock::DistMutex.new("m", expire: 1, auto_release: false)
      m.synchronize { m.fencing_token }
      Ferrolock::ConcurrentLimiter.new("c", 1).within_limit { :ok }
      Ferrolock::ConcurrentLimiter.new("c", 1).status
      Ferrolock::RateLimiter.bucket("r", 1, 1).within_limit { :ok }
      Ferrolock::DualLock.new("d").run { :ok }
      Ferrolock::FairTenant.queue_for([{ queue: "slow", threshold: 1 }], job_class: "J", tenant: "t", jid: "j",
                                      queue: "default")
      job = { "class" => "TestingModeTenantJob", "jid" => "j", "args" => [1], "queue" => "default", "fair_tenant" => "t" }
      Ferrolock::Sidekiq::FairTenantMiddleware.new.call(TestingModeTenantJob, job, "default", nil) { :ok }
      unique = { "class" => "TestingModeUniqueJob", "jid" => "j", "args" => [1], "queue" => "default" }
      Ferrolock::Sidekiq::Unique::ClientMiddleware.new.call(TestingModeUniqueJob, unique, "default", nil) { :ok }
      Ferrolock::Sidekiq::Unique::ServerMiddleware.new.call(TestingModeUniqueJob.new, unique, "default") { :ok }
      dual = { "class" => "TestingModeDualJob", "jid" => "j", "args" => [1], "queue" => "default" }
      Ferrolock::Sidekiq::DualLock::Middleware.new.call(TestingModeDualJob.new, dual, "default") { :ok }
      Ferrolock::Shoryuken::LockMiddleware.new(enabled: true).call(Object.new, "q", TestingModeMessage.new("m")) { :ok }
      puts "done"
    RUBY

    %w[fake disable].each do |mode|
      it "#{mode}: runs every primitive and middleware without opening a connection" do
        out = nil
        connections = count_connections do |url|
          out = run_ruby!(exercise.sub("ARGV.fetch(0)", mode.inspect), env: { "REDIS_URL" => url })
        end
        shown = mode == "fake" ? "fake" : "disabled"
        expect([out.lines.map(&:chomp), connections]).to eq([["mode #{shown}", "done"], 0])
      end
    end

    it "real: the same listener sees the connection (so the count above can fail)" do
      connections = count_connections do |url|
        run_ruby(%(require "ferrolock/testing"\nFerrolock::Testing.real!\n) +
                 %(Ferrolock.configure { |c| c.read_timeout = 0.2 }\nFerrolock::DistMutex.new("m").try_lock rescue nil),
                 env: { "REDIS_URL" => url })
      end
      expect(connections).to be >= 1
    end

    it "is what requiring ferrolock/testing turns on" do
      out = run_ruby!(%(require "ferrolock/testing"\nputs Ferrolock::Testing.mode))
      expect(out).to eq("fake\n")
    end
  end
end
