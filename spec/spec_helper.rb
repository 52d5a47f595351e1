# frozen_string_literal: true

if ENV["COVERAGE"]
  require "simplecov"
  SimpleCov.start { add_filter "/spec/" }
end

require_relative "support/redis_server"
require_relative "support/processes"
require_relative "support/timing"
require_relative "support/interrupt_storm"
require_relative "support/time_limit"
require_relative "support/holds_left"

# FERROLOCK_SIDEKIQ=7: the vendored Sidekiq 7.3 first on the load path, before anything requires sidekiq.
FerrolockTest::SidekiqVersion.setup!

# FerrolockTest.redis_server is started before ferrolock is loaded, so the
# default configuration (REDIS_URL) already points at it.
module FerrolockTest
  def self.redis_server
    @redis_server ||= RedisServer.new.start
  end
end

ENV["REDIS_URL"] = FerrolockTest.redis_server.url
# The test server only: no cluster or sentinels from the environment either (FERROLOCK_REDIS_CLUSTER …),
# and the default namespace, "ferrolock", unless an example sets one.
ENV.each_key.grep(FerrolockTest::NOT_INHERITED).each { |key| ENV.delete(key) }
# No history (per-minute counts in Redis, on by default) here or in the children, whose examples count
# keys; spec/history_spec.rb turns it on where it is the subject.
ENV["FERROLOCK_HISTORY"] = "0"

require "ferrolock"

RSpec.configure do |config|
  config.include FerrolockTest::Processes
  config.include FerrolockTest::Timing
  config.include FerrolockTest::InterruptStorm
  config.disable_monkey_patching!
  # `:sidekiq` marks what bin/test's rspec_sidekiq7 step runs again on Sidekiq 7.3.
  config.define_derived_metadata(file_path: FerrolockTest::SidekiqVersion::SPEC_FILES) { |meta| meta[:sidekiq] = true }
  config.expect_with(:rspec) { |c| c.syntax = :expect }
  config.order = :random
  Kernel.srand config.seed
  config.example_status_persistence_file_path = ENV.fetch("FERROLOCK_RSPEC_STATUS", "tmp/rspec-status.txt")

  # No example can hang the suite: each fails after its time limit (spec/support/time_limit.rb).
  config.around { |example| FerrolockTest::ExampleTimeLimit.run(example) }

  # Every later example (and Sidekiq's pool, built once) reads REDIS_URL: one that leaves it changed
  # fails, and the next finds it as it was (spec/unbundled_children_spec.rb says how it was lost once).
  # An around hook, so an example's own around hook has put back what it changed.
  config.around do |example|
    example.run
    url = FerrolockTest.redis_server.url
    next if ENV["REDIS_URL"] == url

    left = ENV.fetch("REDIS_URL", nil)
    ENV["REDIS_URL"] = url
    raise "this example left ENV[\"REDIS_URL\"] #{left.inspect}, not the test server's #{url}"
  end

  # A hold the example left fails it, not whichever example runs when a later flush makes it lost.
  config.around { |example| FerrolockTest::HoldsLeft.run(example) }

  config.before do
    server = FerrolockTest.redis_server
    server.start unless server.running?
    server.resume
    server.flushall
    if Ferrolock.respond_to?(:configure)
      Ferrolock.configure do |c|
        c.redis_url = server.url
        c.namespace = "ferrolock"
      end
    end
  end

  config.after(:suite) { FerrolockTest.redis_server.destroy }
end
