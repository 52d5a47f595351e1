# frozen_string_literal: true

require "json"

# A real Rails app (spec/fixtures/rails_app; Rails 6.1 on the host, 7.2 in bin/modern; ActiveJob on the
# Sidekiq adapter, the README's initializers) enqueues from one process and is worked off by a real
# `sidekiq -r <app>` process. The jobs record what they did in Redis; the spec checks DualLock,
# ConcurrentLimiter, FairTenant and uniqueness through them, and the Railtie's logger and boot checks
# through Sidekiq's log.
RSpec.describe "A Rails app on Sidekiq" do
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

  # The fixture's record of limits_concurrency's `event`s of job_id (RAILS_APP_RECORD_EVENTS): [[reason, pid,
  # thread name], ...].
  def events(event, job_id)
    list("events").select { |name, id, *| name == event && id == job_id }.map { |_, _, *rest| rest }
  end

  # Waits for the block to be true (a slow, shared VM: a generous bound).
  def wait_for(what, timeout: 60, &block)
    wait_until(timeout: timeout, interval: 0.1, what: what, &block)
  end

  it "runs its jobs through DualLock, ConcurrentLimiter and FairTenant, with Rails.logger and the boot checks" do
    enqueue(<<~RUBY)
      6.times { SyncRecordJob.perform_later(1) }
      6.times { |i| ErpSyncJob.perform_later(i) }
      6.times { |i| HeavyJob.perform_later("greedy", i) }
      2.times { |i| HeavyJob.perform_later("calm", i) }
      LoggerProbeJob.perform_later
      OverLimitJob.perform_later
      3.times { MonthlyReportJob.perform_later("2026-10") }
    RUBY
    # The initializer's configuration (namespace "myapp") is the one the app used to count.
    expect(redis.keys("myapp:*")).not_to be_empty
    expect(redis.keys("ferrolock:*")).to be_empty
    # FairTenant's client middleware ran in the enqueuing process: past 3 a minute, greedy is rerouted.
    expect(queued("default").tally).to eq("greedy" => 3, "calm" => 2)
    expect(queued("default_throttled").tally).to eq("greedy" => 3)
    # Uniqueness's client middleware ran there too: one of the 3 duplicates was enqueued.
    reports = redis.lrange("queue:default", 0, -1).count { |raw| JSON.parse(raw)["wrapped"] == "MonthlyReportJob" }
    expect(reports).to eq(1)

    with_sidekiq(app_dir, concurrency: 5, queues: %w[default default_throttled]) do |sidekiq|
      skipped = -> { sidekiq.log.scan(/SyncRecordJob jid=\h+ job_id=[\h-]+ skipped: a duplicate/).size }
      wait_for("every job") do
        list("sync:ends").size + skipped.call == 6 && list("erp:done").size == 6 &&
          list("heavy:done").size == 8 && list("logger").size == 1 && list("report:done").size == 1 &&
          sidekiq.log.include?('over limit "rails-one-slot"')
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

      # LimiterMiddleware: the ActiveJob job over its limit was rescheduled, logged under its own class.
      # A routine reschedule is one info line of ferrolock's (jid and ActiveJob's job id): ActiveJob
      # logs the run's start, but neither an "Error performing", nor a "Performed" for a run that did
      # not perform, nor a "Retrying … in N seconds" that Sidekiq's poll would belie.
      reschedules = log.lines.grep(/OverLimitJob jid=\h+ job_id=[\h-]+ over limit "rails-one-slot"; rescheduled for/)
      expect(reschedules).not_to be_empty
      expect(log).to include("Performing OverLimitJob")
      expect(log).not_to include("Performed OverLimitJob", "Retrying OverLimitJob", "Error performing OverLimitJob")
      expect(log).not_to include("JobWrapper")
      scheduled = redis.zrange("schedule", 0, -1).map { |raw| JSON.parse(raw)["wrapped"] }
      expect(scheduled).to eq(["OverLimitJob"])
      expect(list("over_limit:ran")).to be_empty

      # Uniqueness: the one report ran, and its lock went with it (a new push is accepted).
      expect(list("report:done").map(&:first)).to eq(["2026-10"])
      expect(Ferrolock::Admin.new(client: Ferrolock::Client.new(namespace: "myapp")).uniques.items).to be_empty

      # FairTenant: both queues were worked off, the rerouted jobs included.
      expect(list("heavy:done").map(&:first).tally).to eq("greedy" => 6, "calm" => 2)

      # The Railtie: Ferrolock.logger is Rails.logger, the initializer's configuration holds in the
      # server, and the boot checks ran after eager loading (Zeitwerk's, as Rails 6.1 apps load).
      expect(list("logger").first.first(5)).to eq(%w[true true myapp true true])
      expect(log).to include("ferrolock: boot checks ran (DualLock: 1 job class; FairTenant: 1 job class;")
      expect(log).not_to include("found no loaded job class", "!!! ferrolock")
    end
  end

  # A server that has admitted no limits_concurrency job runs the timer from its start (the Railtie),
  # so a key resumed after its jobs were parked, by a producer gone since, is worked off.
  it "works off a paused key's parked jobs once resumed, in a Sidekiq started after they were parked" do
    enqueue(<<~RUBY)
      Ferrolock::Admin.new.pause("ParkedJob/p", kind: :limits_concurrency)
      3.times { |i| ParkedJob.perform_later("p", i) }
    RUBY
    expect(redis.llen("queue:default")).to eq(0) # all three parked in Redis, none queued
    with_sidekiq(app_dir, concurrency: 2, queues: %w[default]) do |sidekiq|
      wait_for("Sidekiq's start") { sidekiq.log.include?("ferrolock: boot checks ran") }
      enqueue('Ferrolock::Admin.new.resume("ParkedJob/p", kind: :limits_concurrency)')
      wait_for("the parked jobs") { list("parked:done").size == 3 }
      expect(list("parked:done").map { |name, num, _| [name, num] }).to eq([%w[p 0], %w[p 1], %w[p 2]])
    end
  end

  # A job promoted twice (its first copy had not started when its lease ran out) has two copies queued,
  # each carrying its promotion: two Sidekiq processes take one each, the first to start runs, the other
  # is discarded as a duplicate (spec/active_job_concurrency_repromotion_spec.rb shows it in one process).
  it "runs once a job promoted twice whose two copies reach two Sidekiq processes: the other copy is a " \
     "duplicate, the slot is given back", time_limit: 90 do
    key = "myapp:{concurrency:PromotedTwiceJob/t}"
    env = { "RAILS_APP_RECORD_EVENTS" => "1" }
    with_sidekiq(app_dir, concurrency: 1, queues: %w[default], env: env) do |one|
      with_sidekiq(app_dir, concurrency: 1, queues: %w[default], env: env) do |two|
        job_id = enqueue(<<~RUBY)[/^job 1: (\S+)$/, 1]
          PromotedTwiceJob.perform_later("t", 0) # holds the slot, never run ("held" is not fetched)
          puts "job 1: \#{PromotedTwiceJob.perform_later("t", 1).job_id}"
        RUBY
        copies = -> { redis.lrange("queue:held", 0, -1).select { |raw| raw.include?(job_id) } }
        # Its lease (3 s) runs out twice; the processes' timers poll every second.
        wait_for("two promotions of job 1", timeout: 30) { copies.call.size >= 2 }
        moved = copies.call
        redis.multi do |multi|
          moved.each { |raw| multi.lrem("queue:held", 1, raw) }
          multi.lpush("queue:default", moved)
        end
        wait_for("one copy done, the others discarded") do
          list("twice:done").size + events("discarded", job_id).size >= moved.size
        end
        started = list("twice:started")
        numbers = moved.map { |raw| JSON.parse(raw)["args"].first[Ferrolock::ActiveJob::Promotion::FIELD] }
        promoters = events("promoted", job_id).map { |_, pid, thread| [pid.to_i, thread] }
        duplicates = events("discarded", job_id).select { |reason, *| reason == "duplicate" }.map { |r| r[1].to_i }
        puts "\n  promoted twice: copies=#{moved.size} promotions=#{numbers} " \
             "performed_in=#{started.map { |s| s[2] }} duplicate_in=#{duplicates} promoted_by=#{promoters}"
        expect(moved.size).to be >= 2 # more only if a stall let a lease run out a third time
        expect(numbers).to match_array(1..moved.size)
        expect(started.map { |name, num, _| [name, num] }).to eq([%w[t 1]]) # one perform
        expect(list("twice:done").map { |name, num, _| [name, num] }).to eq([%w[t 1]])
        expect(duplicates.size).to eq(moved.size - 1)
        # Two processes: the copy that ran in one, a duplicate in the other (each takes one job at a time).
        expect((duplicates + started.map { |s| s[2].to_i }).uniq).to match_array([one.pid, two.pid])
        expect(promoters.map(&:first) - [one.pid, two.pid]).to eq([]) # the servers' timers promoted it
        expect(promoters.map(&:last)).to all(eq("ferrolock-concurrency-timer"))
        # The slot given back; what is left expires: the fence and the record of the copy that started.
        wait_for("the slot given back") { !redis.exists?("#{key}:slots") }
        expect(redis.keys("#{key}*").sort).to eq(["#{key}:fence", "#{key}:started:#{job_id}"])
        expect(redis.keys("myapp:*").map { |name| redis.pttl(name) }).to all(be_positive)
      end
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
      config.server_middleware { |chain| chain.add Ferrolock::Sidekiq::DualLock::Middleware }
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

  # Runs `sidekiq -r <app>`, which should stop at boot; returns [exit status, log]. Killed (and the
  # example failed) if it is still running after `timeout`.
  def failed_boot(env, timeout: 60)
    env = { "REDIS_URL" => FerrolockTest.redis_server.url,
            "RUBYLIB" => FerrolockTest::SidekiqVersion.rubylib(FerrolockTest::LIB) }.merge(env)
    command = [*FerrolockTest::SidekiqProcess.command, "-r", app_dir, "-c", "1", "-q", "default"]
    Open3.popen2e(env, *command, chdir: FerrolockTest::ROOT, pgroup: true) do |stdin, output, wait|
      stdin.close
      log = Thread.new { output.read }
      unless wait.join(timeout)
        Process.kill("KILL", -wait.pid)
        raise "sidekiq was still running after #{timeout}s:\n#{log.value}"
      end
      [wait.value, log.value]
    end
  end

  # spec/fixtures/rails_app/extra: job classes with a typo'd and a wrongly typed dual_lock option, and
  # a FairTenant rule with threshold 0, eager-loaded only with this variable.
  let(:bad_jobs) { { "RAILS_APP_EXTRA_JOBS" => "bad_dual_lock,bad_fair_tenant" } }

  it "stops a real sidekiq at boot on bad dual_lock options and FairTenant rules, naming each class and option" do
    enqueue("LoggerProbeJob.perform_later")
    status, log = failed_boot(bad_jobs)

    expect(status.success?).to be(false)
    expect(log).to include("ferrolock boot checks failed (c.boot_checks = false turns them off)",
                           "TypoOptionJob: unknown dual_lock option :ttl",
                           "StringTtlJob: dual_lock wait_ttl must be a number of seconds, got \"60\"",
                           "ZeroThresholdJob: fair_tenant_queues[0].threshold must be positive, got 0")
    # It stopped before working: never registered as a process, and the queued job is still there.
    expect(redis.smembers("processes")).to be_empty
    expect(redis.llen("queue:default")).to eq(1)
    expect(list("logger")).to be_empty
  end

  it "boots despite those bad options with the README's switch, c.boot_checks = false" do
    enqueue("LoggerProbeJob.perform_later")
    with_sidekiq(app_dir, concurrency: 1, env: bad_jobs.merge("RAILS_APP_BOOT_CHECKS" => "off")) do |sidekiq|
      wait_for("the probe job") { list("logger").size == 1 }
      expect(list("logger").first.first(3)).to eq(%w[true false myapp])
      expect(sidekiq.log).not_to include("boot checks ran", "bad options", "found no loaded job class")
    end
  end

  it "warns at Sidekiq start when the app was not eager-loaded, so the boot checks found no job class" do
    with_sidekiq(app_dir, concurrency: 1, env: { "RAILS_APP_EAGER_LOAD" => "false" }) do |sidekiq|
      wait_for("the boot checks") { sidekiq.log.include?("ferrolock: boot checks ran") }
      expect(sidekiq.log).to include("ferrolock: boot checks ran (DualLock: 0 job classes; FairTenant: 0 job classes;",
                                     "DualLock::Middleware.validate! found no loaded job class with dual_lock",
                                     "FairTenant.verify! found no loaded job class with fair_tenant_queues")
    end
  end

  it "finds the rerouting queue in a second Sidekiq 7 capsule (no error, and the rerouted jobs run)" do
    skip "capsules are Sidekiq 7+ (FERROLOCK_SIDEKIQ=7, bin/modern)" unless FerrolockTest::SidekiqVersion.at_least?("7")

    enqueue('5.times { |i| HeavyJob.perform_later("greedy", i) }')
    expect(redis.llen("queue:default_throttled")).to eq(2)
    capsule = { "RAILS_APP_THROTTLED_CAPSULE" => "1" }
    with_sidekiq(app_dir, concurrency: 1, queues: %w[default], env: capsule) do |sidekiq|
      wait_for("the rerouted jobs") { list("heavy:done").size == 5 }
      expect(sidekiq.log).to include("ferrolock: boot checks ran (DualLock: 1 job class; FairTenant: 1 job class;")
      expect(sidekiq.log).not_to include("!!! ferrolock")
    end
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
