# frozen_string_literal: true

require "logger"
require "active_job"
require "active_job/uniqueness"
require_relative "support/redis_cluster"

# ActiveJob::Uniqueness on a Redis Cluster (3 masters + 3 replicas, spec/support/redis_cluster.rb): the
# old gem's keys have no hash tag, so a class's locks spread over the masters; each is one key, so
# every script stays in one slot, and unlock! scans every master.
RSpec.describe "ActiveJob::Uniqueness on a Redis Cluster", time_limit: 120 do
  let(:cluster) { FerrolockTest::RedisCluster.shared }

  around do |example|
    cluster.flushall
    previous = ActiveJob::Base.logger
    ActiveJob::Base.logger = Logger.new(nil)
    ActiveJob::Uniqueness.configure { |c| c.client = Ferrolock::Client.new(cluster: cluster.urls) }
    ActiveJob::Uniqueness.reset_manager!
    example.run
  ensure
    ActiveJob::Base.logger = previous
    ActiveJob::Uniqueness.configure { |c| c.client = nil }
    ActiveJob::Uniqueness.reset_manager!
  end

  it "locks, refuses duplicates and unlocks across the masters; unlock! frees a class's locks on all of them" do
    klass = stub_const("UqClusterJob", Class.new(ActiveJob::Base) do
      self.queue_adapter = :test
      unique :until_executed, on_conflict: :log
      def perform(*) = nil
    end)
    jobs = Array.new(40) { |i| klass.perform_later(i) }
    expect(jobs).to all(be_a(klass))
    expect(Array.new(40) { |i| klass.perform_later(i) }).to all(be(false))
    per_master = cluster.masters.map { |server| server.redis.keys("activejob_uniqueness:*").size }
    expect(per_master.sum).to eq(40)
    expect(per_master.count(&:positive?)).to be > 1 # (spread: unlock! must scan them all)
    ActiveJob::Base.execute(klass.queue_adapter.enqueued_jobs.shift.transform_keys(&:to_s))
    expect(cluster.masters.sum { |server| server.redis.keys("activejob_uniqueness:*").size }).to eq(39)
    klass.unlock!
    expect(cluster.masters.sum { |server| server.redis.keys("activejob_uniqueness:*").size }).to eq(0)
  end
end
