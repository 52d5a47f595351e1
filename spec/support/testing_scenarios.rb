# frozen_string_literal: true

require "sidekiq"
require "ferrolock/testing"

# The other spec files run against Redis with no Switch in between: the examples that need the
# testing mode install its factory themselves (FerrolockTest::TestingModes.around).
Ferrolock::Backend.factory = nil

module FerrolockTest
  module TestingModes
    # Runs an example in `mode` with ferrolock/testing's factory installed and a fresh fake store.
    def self.around(example, mode)
      Ferrolock::Backend.factory = Ferrolock::Testing
      Ferrolock::Testing.reset!
      Ferrolock::Testing.public_send(mode == :disabled ? :disable! : :"#{mode}!") { example.run }
    ensure
      Ferrolock::Backend.factory = nil
    end
  end

  # `testing_mode: :fake` (or :disabled) metadata runs the group's examples in that mode, with
  # ferrolock's Redis a closed port (a call that reaches Redis fails the example); `:real`, as if
  # ferrolock/testing were not loaded. A spec of a native behaviour runs once per mode with it:
  #
  #   FerrolockTest::TestingModes::ALL.each do |mode|
  #     RSpec.describe "DistMutex#sleep", testing_mode: mode do ... end
  #   end
  module TestingModes
    ALL = %i[real fake disabled].freeze

    def self.around_tagged(example)
      mode = example.metadata[:testing_mode]
      mode == :real ? example.run : around(example, mode)
    end

    # After spec_helper's configuration of the test server.
    def self.before_tagged(example)
      return if example.metadata[:testing_mode] == :real

      dead = "redis://127.0.0.1:#{RedisServer.free_port}/0"
      Ferrolock.configure { |c| c.redis_url = dead }
    end
  end

  # How a scenario moves time: the fake backends read Time.now, which a stub shifts at once;
  # Redis' clock can only be waited out (so scenarios keep their spans short).
  class ScenarioClock
    def initialize(mode, context)
      @mode = mode
      @offset = 0.0
      return unless mode == :fake

      offset = -> { @offset }
      context.allow(Time).to(context.receive(:now).and_wrap_original { |now| now.call + offset.call })
    end

    def advance(seconds)
      @mode == :fake ? @offset += seconds : sleep(seconds)
    end
  end
end

# (Children of testing_modes_spec load this file without RSpec.)
if defined?(RSpec.configure)
  RSpec.configure do |config|
    config.around(:each, :testing_mode) { |example| FerrolockTest::TestingModes.around_tagged(example) }
    config.before(:each, :testing_mode) { |example| FerrolockTest::TestingModes.before_tagged(example) }
  end
end

# Job classes of the middleware scenarios.
class TestingModeUniqueJob
  include Sidekiq::Job
  sidekiq_options lock: :until_executed

  def perform(*); end
end

class TestingModeTenantJob
  include Sidekiq::Job
  sidekiq_options fair_tenant_queues: [{ queue: "slow", threshold: 2, per: 1 }]

  def perform(*); end
end

class TestingModeDualJob
  include Sidekiq::Job
  sidekiq_options dual_lock: { wait_timeout: 5 }

  def perform(*); end
end

# An SQS message as Ferrolock::Shoryuken::LockMiddleware reads it.
TestingModeMessage = Struct.new(:message_id) do
  def delete = nil
end
