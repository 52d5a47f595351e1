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
