# frozen_string_literal: true

require "spec_helper"
require_relative "support/real_shoryuken"

# The maxmemory-policy warning comes when the process boots (issue 39), before any job or lock: a real
# Sidekiq server's :startup, the real Shoryuken 6.2.1 launcher's :startup, and a Rails app's boot
# (the Railtie). Each process points ferrolock (FERROLOCK_REDIS_URL) at a Redis with allkeys-lru
# and never uses it.
RSpec.describe "The maxmemory-policy warning at boot", time_limit: 90 do
  before(:context) { @lru = FerrolockTest::RedisServer.new(extra_args: %w[--maxmemory-policy allkeys-lru]).start }
  after(:context) { @lru.destroy }

  let(:env) { { "FERROLOCK_REDIS_URL" => @lru.url } }
  let(:warning) { "ferrolock: Redis at #{@lru.url} has maxmemory-policy allkeys-lru" }

  it "is logged at a Sidekiq server's startup, before any job ran" do
    with_sidekiq("spec/fixtures/sidekiq_app.rb", concurrency: 1, env: env) do |sidekiq|
      wait_until(timeout: 20, what: -> { "the warning in sidekiq's log:\n#{sidekiq.log}" }) do
        sidekiq.log.include?(warning)
      end
      expect(sidekiq.log.scan(warning).size).to eq(1)
      expect(@lru.redis.keys("probe:*")).to be_empty # no job, no ferrolock call but the check
    end
  end

  it "is logged at Shoryuken's startup (its launcher's :startup event)" do
    skip(FerrolockTest::RealShoryuken.missing) if FerrolockTest::RealShoryuken.missing
    out = run_ruby!(<<~RUBY, env: FerrolockTest::RealShoryuken.child_env(env), unbundled: true, timeout: 60)
      require "logger"
      require "stringio"
      begin
        require "aws-sdk-core"
      rescue LoadError => e
        print "skip: \#{e.message}"
        exit 0
      end
      module Aws; module SQS; Client = Class.new unless const_defined?(:Client, false); end; end
      $LOAD_PATH.unshift(File.join(ENV.fetch("FERROLOCK_SHORYUKEN_DIR"), "lib"))
      require "shoryuken"
      # bin/shoryuken defines Shoryuken::CLI, then loads the app (which requires ferrolock).
      Shoryuken.const_set(:CLI, Module.new)
      require "ferrolock"
      log = StringIO.new
      Ferrolock.config.logger = Logger.new(log)
      Shoryuken::Logging.logger = Logger.new(nil)
      print "before start: \#{log.string.empty?}\\n"
      Shoryuken::Launcher.new.start
      print log.string
    RUBY
    skip(out) if out.start_with?("skip: ")
    expect(out).to start_with("before start: true\n")
    expect(out.scan(warning).size).to eq(1)
  end

  it "is logged when a Rails app boots (the Railtie), not at its first lock" do
    _out, err, status = Open3.capture3(RbConfig.ruby, "-e", 'require "rails"')
    skip "railties cannot be loaded: #{err.lines.first}" unless status.success?

    out = run_ruby!(<<~RUBY, env: env, timeout: 60)
      require "rails"
      require "ferrolock"
      require "logger"
      require "stringio"
      log = StringIO.new
      class BootWarningApp < Rails::Application
        config.eager_load = false
        config.logger = Logger.new(nil)
        config.secret_key_base = "boot-warning"
      end
      Ferrolock.configure { |c| c.logger = Logger.new(log) }
      BootWarningApp.initialize!
      print "checked: \#{Ferrolock.client.eviction_check.join(20)}\\n"
      print log.string
    RUBY
    expect(out).to start_with("checked: true\n")
    expect(out.scan(warning).size).to eq(1)
  end
end
