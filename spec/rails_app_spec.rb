# frozen_string_literal: true

require "json"

# A real Rails 6.1 app (spec/fixtures/rails_app: ActiveJob on the Sidekiq adapter, the README's
# initializers) enqueues from one process and is worked off by a real `sidekiq -r <app>` process.
# The jobs record what they did in Redis; the spec checks DualLock, ConcurrentLimiter and FairTenant
# through them, and the Railtie's logger and boot checks through Sidekiq's log.
RSpec.describe "A Rails 6.1 app on Sidekiq" do
  before(:context) do
    _out, err, status = FerrolockTest::RailsAppCheck.railties
    skip "railties (Debian's ruby-railties 6.1) cannot be loaded: #{err.lines.first}" unless status.success?
  end

  let(:redis) { FerrolockTest.redis_server.redis }
  # `sidekiq -r <app directory>`, as a Rails app runs it: Sidekiq requires rails and sidekiq/rails,
  # then config/environment.rb.
  let(:app_dir) { File.join(FerrolockTest::ROOT, "spec/fixtures/rails_app") }

  def enqueue(code)
    run_ruby!(<<~RUBY, timeout: 60)
      require #{File.join(app_dir, "config/environment.rb").dump}
      #{code}
    RUBY
  end

  def list(name) = redis.lrange("rails:#{name}", 0, -1).map(&:split)

  def queued(queue)
    jobs = redis.lrange("queue:#{queue}", 0, -1).map { |raw| JSON.parse(raw) }
    jobs.select { |job| job["wrapped"] == "HeavyJob" }.map { |job| job["args"].first["arguments"].first }
  end

  # Waits for the block to be true (a slow, shared VM: a generous bound).
  def wait_for(what, timeout: 60)
    deadline = Ferrolock.monotonic + timeout
    until yield
      raise "timed out waiting for #{what}" if Ferrolock.monotonic > deadline

      sleep 0.1
    end
  end

  it "runs its jobs through DualLock, ConcurrentLimiter and FairTenant, with Rails.logger and the boot checks" do
    enqueue(<<~RUBY)
      6.times { SyncRecordJob.perform_later(1) }
      6.times { |i| ErpSyncJob.perform_later(i) }
      6.times { |i| HeavyJob.perform_later("greedy", i) }
      2.times { |i| HeavyJob.perform_later("calm", i) }
      LoggerProbeJob.perform_later
    RUBY
    # FairTenant's client middleware ran in the enqueuing process: past 3 a minute, greedy is rerouted.
    expect(queued("default").tally).to eq("greedy" => 3, "calm" => 2)
    expect(queued("default_throttled").tally).to eq("greedy" => 3)

    with_sidekiq(app_dir, concurrency: 5, queues: %w[default default_throttled]) do |sidekiq|
      skipped = -> { sidekiq.log.scan(/SyncRecordJob \S+ skipped: a duplicate/).size }
      wait_for("every job") do
        list("sync:ends").size + skipped.call == 6 && list("erp:done").size == 6 &&
          list("heavy:done").size == 8 && list("logger").size == 1
      end
      log = sidekiq.log

      # DualLock: runs never overlapped, and the duplicates that found one running and one waiting
      # were skipped (logged through Rails.logger under the job's own class).
      runs = list("sync:starts").map(&:last).map(&:to_f).sort.zip(list("sync:ends").map(&:last).map(&:to_f).sort)
      expect(runs.size).to be >= 1
      expect(skipped.call).to be >= 1
      runs.each_cons(2) { |(_, ended), (started, _)| expect(started).to be >= ended }

      # ConcurrentLimiter: every job ran, at most 2 at once, and the limit was reached.
      expect(redis.get("rails:erp:max")).to eq("2")
      expect(list("erp:done").map(&:first).sort).to eq(%w[0 1 2 3 4 5])

      # FairTenant: both queues were worked off, the rerouted jobs included.
      expect(list("heavy:done").map(&:first).tally).to eq("greedy" => 6, "calm" => 2)

      # The Railtie: Ferrolock.logger is Rails.logger, and the boot checks ran after eager loading.
      expect(list("logger").first.first(2)).to eq(%w[true true])
      expect(log).to include("ferrolock: boot checks ran (DualLock: 1 job class; FairTenant: 1 job class;")
      expect(log).not_to include("found no loaded job class", "!!! ferrolock")
    end
  end

  it "reports at Sidekiq start a rerouting queue the process does not fetch (FairTenant.verify!)" do
    with_sidekiq(app_dir, concurrency: 1, queues: %w[default]) do |sidekiq|
      wait_for("the boot checks") { sidekiq.log.include?("ferrolock: boot checks ran") }
      expect(sidekiq.log).to include('!!! ferrolock FairTenant: HeavyJob reroutes to queue "default_throttled"')
    end
  end

  it "skips the boot checks with c.boot_checks = false" do
    out = enqueue(<<~RUBY)
      config = Sidekiq.respond_to?(:default_configuration) ? Sidekiq.default_configuration : Sidekiq
      config.client_middleware { |chain| chain.add Ferrolock::FairTenant::ClientMiddleware }
      config.server_middleware { |chain| chain.add Ferrolock::Sidekiq::DualLockMiddleware }
      log = StringIO.new
      Ferrolock.configure { |c| c.logger = Logger.new(log) }
      Ferrolock::Railtie.boot_checks(config)
      puts "on: \#{log.string.include?("boot checks ran")}"
      log.truncate(0)
      Ferrolock.configure { |c| c.boot_checks = false }
      Ferrolock::Railtie.boot_checks(config)
      puts "off: \#{log.string.empty?}"
      # An app's own logger is kept: the Railtie only fills in Rails.logger when none was set.
      mine = Ferrolock.logger
      Ferrolock::Railtie.default_logger(Logger.new(nil))
      puts "kept: \#{Ferrolock.logger.equal?(mine)}"
    RUBY
    expect(out).to include("on: true", "off: true", "kept: true")
    expect { Ferrolock.config.boot_checks = "no" }.to raise_error(TypeError, /boot_checks must be true or false/)
  end

  it "puts the README's initializers in the app verbatim (but for the magic comment)" do
    readme = File.read(File.join(FerrolockTest::ROOT, "README.md"))
    %w[ferrolock sidekiq].each do |name|
      code = File.read(File.join(app_dir, "config/initializers/#{name}.rb"))
      expect(readme).to include(code.delete_prefix("# frozen_string_literal: true\n\n"))
    end
  end
end

module FerrolockTest
  # Whether this machine can load railties, asked of a child process (this one must not load Rails).
  module RailsAppCheck
    def self.railties
      Open3.capture3(RbConfig.ruby, "-e", 'require "rails"; require "active_job/railtie"')
    end
  end
end
