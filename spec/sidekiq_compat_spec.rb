# frozen_string_literal: true

require "sidekiq"

# What differs between Sidekiq 6.4, 7.x (capsules) and 8.x, and the refusal of versions ferrolock does
# not support. Runs on 6.4.1 (bin/test rspec), on 7.3.10 (bin/test rspec_sidekiq7) and on 8.1 (bin/test
# modern).
RSpec.describe Ferrolock::Sidekiq::Compat do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:seven) { Gem::Version.new(Sidekiq::VERSION) >= Gem::Version.new("7") }

  describe ".check!" do
    it "accepts 6.4 to 8.x and the loaded Sidekiq" do
      accepted = %w[6.4.0 6.4.1 6.5.12 7.0.0 7.3.10 7.9.9 8.0.0 8.1.7 8.9.9]
      expect(accepted.map { |v| described_class.check!(v) }).to all(be(true))
      expect(described_class.check!).to be(true)
      expect(described_class.loaded_version).to eq(Sidekiq::VERSION)
    end

    it "refuses older and newer majors, naming the version and what is supported" do
      %w[6.3.1 5.2.10 9.0.0 9.1.2 10.1.0].each do |version|
        expect { described_class.check!(version) }
          .to raise_error(Ferrolock::Error, /supports Sidekiq >= 6\.4, < 9 .*Sidekiq #{Regexp.escape(version)} is/)
      end
    end
  end

  it "fails at `chain.add` (when the middleware loads) under an unsupported Sidekiq, and on first use" do
    out = run_ruby!(<<~RUBY)
      require "sidekiq"
      Sidekiq.send(:remove_const, :VERSION)
      Sidekiq::VERSION = "9.0.5" # what a Sidekiq 9 would report
      require "ferrolock"
      chain = Sidekiq::Middleware::Chain.new
      %w[DualLock::Middleware LimiterMiddleware].each do |name|
        chain.add Ferrolock::Sidekiq.const_get(name)
        puts "\#{name}: added"
      rescue Ferrolock::Error => e
        puts "\#{name}: \#{e.message}"
      end
      begin
        Ferrolock::Sidekiq::FairTenantMiddleware.new
      rescue Ferrolock::Error => e
        puts "FairTenantMiddleware: \#{e.message}"
      end
      begin
        Ferrolock::FairTenant.verify!([], queues: nil)
      rescue Ferrolock::Error => e
        puts "verify!: \#{e.message}"
      end
    RUBY
    expect(out.lines.size).to eq(4), out
    refusal = /: ferrolock .* supports Sidekiq >= 6\.4, < 9 .*Sidekiq 9\.0\.5 is loaded/
    expect(out.lines).to all(match(refusal))
  end

  describe "FairTenant.verify! in a real Sidekiq server" do
    let(:app) { "spec/fixtures/capsule_app.rb" }
    let(:queues) { ["default,6", "default_throttled,3", "default_superslow,1"] }

    def verify_problems(env)
      redis.flushdb
      with_sidekiq(app, concurrency: 1, queues: queues, env: env) do
        wait_until(timeout: 20) { redis.get("verify:done") }
      end
      redis.lrange("verify:problems", 0, -1)
    end

    it "counts the queues of every capsule (Sidekiq 7), and only the fetched ones" do
      without = verify_problems({})
      expect(without.size).to eq(1), without.inspect
      expect(without.first).to include('FtChildJob reroutes to queue "ft_parked_slow"')

      skip "capsules exist from Sidekiq 7 on (this is #{Sidekiq::VERSION})" unless seven

      expect(verify_problems("FT_CAPSULE_QUEUES" => "ft_parked_slow")).to eq([])
      # Another capsule's queue that no rule names changes nothing; a missing one is still reported.
      expect(verify_problems("FT_CAPSULE_QUEUES" => "other").size).to eq(1)
    end
  end
end
