# frozen_string_literal: true

# `require "ferrolock"` makes every constant the README names usable, without loading Sidekiq or
# Shoryuken, whichever of ferrolock and sidekiq an app (Bundler.require) loads first. Each case runs
# in a fresh Ruby process.
require_relative "support/real_shoryuken"

RSpec.describe "Loading ferrolock" do
  readme = File.read(File.join(FerrolockTest::ROOT, "README.md"))
  # Every Ferrolock constant the README names, e.g. Ferrolock::Sidekiq::DualLock::Middleware.
  # (Ferrolock::Testing is loaded only by `require "ferrolock/testing"`.)
  documented = readme.scan(/Ferrolock(?:::[A-Z]\w*)+/).uniq.grep_v(/\AFerrolock::Testing\b/).sort
  # And the ones the README may not spell out in full.
  constants = (documented + %w[
    Ferrolock::VERSION Ferrolock::Configuration Ferrolock::Client Ferrolock::Error Ferrolock::ConnectionError
    Ferrolock::TimeoutError Ferrolock::LockLost Ferrolock::OverLimit Ferrolock::EVENTS
    Ferrolock::DistMutex Ferrolock::DualLock Ferrolock::ConcurrentLimiter
    Ferrolock::Sidekiq::DualLock::Middleware Ferrolock::Sidekiq::DualLock::Settings
    Ferrolock::Sidekiq::LimiterMiddleware Ferrolock::Sidekiq::Reschedule
    Ferrolock::FairTenant Ferrolock::FairTenant::ClientMiddleware
    Ferrolock::Shoryuken Ferrolock::Shoryuken::Lock Ferrolock::Shoryuken::MessageLock
  ]).uniq.sort

  # Ruby code printing one line per constant that does not resolve, then what got loaded.
  resolve = <<~RUBY
    missing = #{constants.inspect}.reject { |name| Object.const_get(name) rescue false }
    missing.each { |name| puts "missing \#{name}" }
    puts "sidekiq loaded: \#{!defined?(::Sidekiq::VERSION).nil?}"
    puts "shoryuken loaded: \#{!defined?(::Shoryuken).nil?}"
    puts "active_support loaded: \#{!defined?(::ActiveSupport).nil?}"
    puts "testing mode loaded: \#{!defined?(::Ferrolock::Testing).nil?}"
  RUBY

  it "finds the documented constants in the README" do
    expect(documented).to include("Ferrolock::Sidekiq::DualLock::Middleware", "Ferrolock::Sidekiq::LimiterMiddleware",
                                  "Ferrolock::FairTenant::ClientMiddleware", "Ferrolock::Shoryuken::Lock")
  end

  it "alone: resolves every constant and loads neither Sidekiq, Shoryuken, ActiveSupport nor the testing mode" do
    out = run_ruby!(%(require "ferrolock"\n#{resolve}))
    expect(out.lines.grep(/missing/)).to eq([])
    expect(out).to include("sidekiq loaded: false", "shoryuken loaded: false", "active_support loaded: false",
                           "testing mode loaded: false")
  end

  [%w[ferrolock sidekiq], %w[sidekiq ferrolock], %w[sidekiq ferrolock/sidekiq/dual_lock/middleware]].each do |order|
    it "with require #{order.join(", then ")}: the README's middleware setup works and ::Sidekiq is Sidekiq's" do
      out = run_ruby!(<<~RUBY)
        #{order.map { |feature| "require #{feature.inspect}" }.join("\n")}
        #{resolve}
        Sidekiq.configure_server do |config|
          config.server_middleware do |chain|
            chain.add Ferrolock::Sidekiq::DualLock::Middleware
            chain.add Ferrolock::Sidekiq::LimiterMiddleware, max_reschedules: 3
          end
        end
        Sidekiq.configure_client { |c| c.client_middleware { |m| m.add Ferrolock::FairTenant::ClientMiddleware } }
        # configure_server's block runs only inside a Sidekiq server: build the same chain here.
        chain = Sidekiq::Middleware::Chain.new
        chain.add Ferrolock::Sidekiq::DualLock::Middleware
        chain.add Ferrolock::Sidekiq::LimiterMiddleware, max_reschedules: 3
        puts "server chain: \#{chain.retrieve.map(&:class).join(", ")}"
        # ferrolock code reaches Sidekiq's own constants (a bare `Sidekiq` inside Ferrolock is ours).
        jid = Ferrolock::Sidekiq::Reschedule.call({ "class" => "SomeJob", "args" => [1], "jid" => "j1",
                                                    "queue" => "default" }, delay: 60, counter: "n")
        puts "rescheduled: \#{jid}"
        puts "logger: \#{Ferrolock.logger.equal?(::Sidekiq.logger)}"
      RUBY
      expect(out.lines.grep(/missing/)).to eq([])
      expect(out).to include("sidekiq loaded: true", "shoryuken loaded: false")
      expect(out).to include("server chain: Ferrolock::Sidekiq::DualLock::Middleware, " \
                             "Ferrolock::Sidekiq::LimiterMiddleware")
      expect(out).to include("rescheduled: 1", "logger: true")
      expect(FerrolockTest.redis_server.redis.zcard("schedule")).to eq(1)
    end
  end

  # With the real, vendored Shoryuken 6.2.1 (outside Bundler: its Debian dependencies are not in
  # the Gemfile), in both orders; the README's chain setup then puts the Lock before AutoDelete.
  [%w[ferrolock shoryuken], %w[shoryuken ferrolock]].each do |order|
    it "with require #{order.join(", then ")} (real Shoryuken): resolves every constant, the README setup works" do
      reason = FerrolockTest::RealShoryuken.missing
      skip(reason) if reason
      out = run_ruby!(<<~RUBY, unbundled: true)
        begin
          require "aws-sdk-core"
        rescue LoadError => e
          puts "skip: aws-sdk-core cannot be required (\#{e.message})"
          exit 0
        end
        module Aws; module SQS; Client = Class.new; end; end # aws-sdk-sqs is not installable here
        $LOAD_PATH.unshift(#{File.join(FerrolockTest::RealShoryuken::DIR, "lib").dump})
        #{order.map { |feature| "require #{feature.inspect}" }.join("\n")}
        #{resolve}
        Shoryuken.const_set(:CLI, Class.new) # configure_server yields only inside the server
        Shoryuken.configure_server do |config|
          config.server_middleware do |chain|
            chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::Lock
          end
        end
        puts "chain: \#{Shoryuken.server_middleware.entries.map(&:klass).map { |k| k.name.split("::").last }.join(" ")}"
      RUBY
      skip(out[/skip: .*/]) if out.start_with?("skip:")
      expect(out.lines.grep(/missing/)).to eq([])
      expect(out).to include("shoryuken loaded: true", "sidekiq loaded: false")
      expect(out).to include("chain: Timing ExponentialBackoffRetry LockMiddleware AutoDelete AutoExtendVisibility")
    end
  end

  # ferrolock ships activejob-uniqueness' require paths; only requiring one defines ActiveJob::Uniqueness.
  %w[active_job/uniqueness activejob/uniqueness].each do |path|
    it "defines ActiveJob::Uniqueness as ferrolock's drop-in only with require #{path.inspect}" do
      out = run_ruby!(<<~RUBY)
        require "ferrolock"
        require "active_job"
        before = defined?(ActiveJob::Uniqueness).nil?
        require #{path.inspect}
        loaded = $LOADED_FEATURES.select { |f| f.end_with?("/active_job/uniqueness.rb") }
        puts [before, ActiveJob::Uniqueness.equal?(Ferrolock::ActiveJob::Uniqueness), ActiveJob::Uniqueness::JobNotUnique.name,
              loaded.map { |f| f.delete_prefix("\#{File.realpath(#{FerrolockTest::LIB.dump})}/") }.sort].inspect
      RUBY
      expect(out.lines.last.chomp).to eq('[true, true, "Ferrolock::ActiveJob::Uniqueness::JobNotUnique", ' \
                                         '["active_job/uniqueness.rb", "ferrolock/active_job/uniqueness.rb"]]')
    end
  end

  it "never writes a bare Sidekiq constant inside Ferrolock (it would mean Ferrolock::Sidekiq)" do
    own = Ferrolock::Sidekiq.constants.map(&:to_s) + Ferrolock::Sidekiq.singleton_methods.map(&:to_s)
    offenders = Dir[File.join(FerrolockTest::LIB, "**", "*.rb")].flat_map do |path|
      File.readlines(path).each_with_index.filter_map do |line, index|
        code = line.sub(/#.*/, "")
        names = code.scan(/(?<![:\w])Sidekiq(?:::|\.)(\w+)/).flatten - own
        "#{path}:#{index + 1}: #{line.strip}" unless names.empty?
      end
    end
    expect(offenders).to eq([])
  end

  # Digest::SHA256 loaded lazily (`require "digest"` alone) is loaded by its first use, and two
  # threads making that first use at once can get "RuntimeError: Digest::Base cannot be directly
  # inherited in Ruby" (a Sidekiq job failed so in CI). Each class that hashes loads it up front.
  %w[Ferrolock::Sidekiq::Unique::Digest Ferrolock::Sidekiq::DualLock::Settings
     Ferrolock::Shoryuken::IdempotencyKey Ferrolock::Shoryuken::Resumption].each do |name|
    it "has SHA-256 loaded once #{name} is, before its first use" do
      out = run_ruby!(<<~RUBY)
        require "ferrolock"
        before = Digest.const_defined?(:SHA256, false)
        Object.const_get(#{name.inspect})
        puts [before, Digest.const_defined?(:SHA256, false)].inspect
      RUBY
      expect(out.lines.last.chomp).to end_with("true]")
    end
  end
end
