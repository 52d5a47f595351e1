# frozen_string_literal: true

# DualLock::Middleware.validate! and FairTenant.verify! at boot: every bad class is reported at once,
# and a check that found no class says so. Each example runs in a fresh process, so the classes
# loaded by other specs do not count.
RSpec.describe "Boot checks" do
  def boot(code)
    run_ruby!(<<~RUBY)
      require "sidekiq"
      require "ferrolock"
      require "logger"
      require "stringio"
      log = StringIO.new
      Ferrolock.configure { |c| c.logger = Logger.new(log) }
      #{code}
      print log.string
    RUBY
  end

  it "DualLock::Middleware.validate! names every bad class, not only the first" do
    out = boot(<<~RUBY)
      class GoodJob; include Sidekiq::Worker; sidekiq_options dual_lock: true; end
      # Sidekiq 7's name for a job class (an alias of Sidekiq::Worker on 6.4): found all the same.
      class ZeroTtlJob; include Sidekiq::Job; sidekiq_options dual_lock: { exec_ttl: 0 }; end
      class TypoJob; include Sidekiq::Worker; sidekiq_options dual_lock: { ttl: 5 }; end
      class ProcKeyJob; include Sidekiq::Worker; sidekiq_options dual_lock: { key: ->(id) { id } }; end
      begin
        Ferrolock::Sidekiq::DualLock::Middleware.validate!
      rescue ArgumentError => e
        puts e.message
      end
      puts Ferrolock::Sidekiq::DualLock::Middleware.validate!(GoodJob)
    RUBY
    expect(out).to include("3 job classes have bad options")
    expect(out).to include("ZeroTtlJob: dual_lock exec_ttl", "TypoJob: unknown dual_lock option :ttl",
                           "ProcKeyJob: a dual_lock key: proc")
    expect(out).not_to include("GoodJob:")
    expect(out).to include("true")
  end

  it "FairTenant.verify! names every class with bad rules" do
    out = boot(<<~RUBY)
      class NoQueueJob; include Sidekiq::Worker; sidekiq_options fair_tenant_queues: [{ threshold: 5 }]; end
      class ZeroJob; include Sidekiq::Worker
        sidekiq_options fair_tenant_queues: [{ threshold: 0, queue: "slow" }]
      end
      begin
        Ferrolock::FairTenant.verify!(queues: %w[default slow])
      rescue ArgumentError => e
        puts e.message
      end
    RUBY
    expect(out).to include("2 job classes have bad options", "NoQueueJob", "ZeroJob")
    expect(out).to match(/threshold must be positive/)
  end

  it "warns when a boot check found no class to check (the app was not eager-loaded)" do
    out = boot(<<~RUBY)
      puts Ferrolock::Sidekiq::DualLock::Middleware.validate!
      p Ferrolock::FairTenant.verify!(queues: ["default"])
    RUBY
    expect(out).to include("WARN -- : ferrolock: DualLock::Middleware.validate! found no loaded job class with " \
                           "dual_lock in its sidekiq_options, so it checked nothing; eager-load the app first")
    expect(out).to include("FairTenant.verify! found no loaded job class with fair_tenant_queues")
    expect(out).to include("true\n[]\n")
  end
end
