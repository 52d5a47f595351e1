# frozen_string_literal: true

require "logger"
require_relative "support/active_job_jobs"
require_relative "support/testing_scenarios"

# A limit changed live behaves the same against Redis (real!) and in memory (fake!): Admin#pause,
# #set_limit, #resume and #clear_override reach Ferrolock::Testing's fake limiters and limits_concurrency keys.
RSpec.describe "Limits changed live under Ferrolock::Testing" do
  include FerrolockTest::ActiveJobJobs

  %i[real fake].each do |mode|
    context "in #{mode} mode" do
      around { |example| FerrolockTest::TestingModes.around(example, mode) }

      # In fake mode ferrolock's Redis is a closed port: a call reaching it would fail the example.
      before do
        dead = "redis://127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0"
        Ferrolock.configure { |c| c.redis_url = dead } if mode == :fake
      end

      let(:admin) { Ferrolock::Admin.new }
      let(:limiter) { Ferrolock::ConcurrentLimiter.new("fake:live", 2, local_passes: 0) }

      def can_enter?
        limiter.within_limit(wait_timeout: 0) { true }
      rescue Ferrolock::OverLimit
        false
      end

      it "pauses a limits_concurrency key (jobs blocked, on_conflict: :discard too); resumed, the timer runs them" do
        with_loggers do
          klass = recording("FakeLiveJob", to: 1, key: ->(account, _n) { account }, on_conflict: :discard)
          expect(admin.pause("FakeLiveJob/a", kind: :limits_concurrency).to_h).to eq(limit: nil, paused: true)
          expect(Array.new(2) { |n| klass.perform_later("a", n) }).to all(be_a(klass)) # blocked, not discarded
          expect(queue(klass)).to be_empty
          expect(admin.limit_override("FakeLiveJob/a", kind: :limits_concurrency).to_h).to eq(limit: nil, paused: true)
          expect(admin.resume("FakeLiveJob/a", kind: :limits_concurrency).to_h).to eq(limit: nil, paused: false)
          wait_until(timeout: 5, what: "the first blocked job promoted") { queue(klass).size == 1 }
          work_off(klass)
          expect(ran.map { |account, n, _| [account, n] }).to eq([["a", 0], ["a", 1]])
        end
      ensure
        Ferrolock::ActiveJob::Slots.reset!
      end

      it "pauses, lowers without evicting, resumes a waiter and clears" do
        expect(admin.pause("fake:live").to_h).to eq(limit: nil, paused: true)
        expect(can_enter?).to be(false)
        expect(limiter.status).to eq(limit: 2, in_use: 0, waiting: 0, override: { limit: nil, paused: true })
        waiter = Thread.new { limiter.within_limit(wait_timeout: 10) { :ran } }
        sleep 0.3
        expect(admin.set_limit("fake:live", 1).to_h).to eq(limit: 1, paused: true)
        expect(admin.resume("fake:live").to_h).to eq(limit: 1, paused: false)
        expect(waiter.value).to eq(:ran)
        limiter.within_limit { expect(can_enter?).to be(false) }
        expect(admin.clear_override("fake:live").to_h).to eq(limit: nil, paused: false)
        limiter.within_limit { expect(can_enter?).to be(true) }
      end
    end
  end
end
