# frozen_string_literal: true

require "logger"
require "active_job"
require "active_job/uniqueness"

# ActiveJob::Uniqueness on ActiveJob's :async adapter (jobs run on its thread pool in this process)
# against the test Redis, counted: many threads enqueueing the same job, and a mixed fleet in which
# another process takes the same keys the way activejob-uniqueness' Redlock does (SET NX PX with a
# random value, DEL when done). The old gem itself needs the redlock and redis-client gems, which this
# machine does not have: the child does exactly what Redlock does to the key.
# Sets KEYS[1] to ARGV[1] if higher.
UQ_KEEP_MAX = "if tonumber(redis.call('GET', KEYS[1]) or 0) < tonumber(ARGV[1]) then " \
              "redis.call('SET', KEYS[1], ARGV[1]) end"

RSpec.describe "ActiveJob::Uniqueness on :async", time_limit: 60 do
  let(:redis) { FerrolockTest.redis_server.redis }

  around do |example|
    previous = ActiveJob::Base.logger
    # ActiveJob 6.1 warns (deprecation) at each aborted perform unless the app chose 7.0's behaviour.
    skip_after = ActiveJob::Base.try(:skip_after_callbacks_if_terminated)
    ActiveJob::Base.skip_after_callbacks_if_terminated = true unless skip_after.nil?
    ActiveJob::Base.logger = Logger.new(nil)
    ActiveJob::Uniqueness.reset_manager!
    example.run
  ensure
    ActiveJob::Base.logger = previous
    ActiveJob::Base.skip_after_callbacks_if_terminated = skip_after unless skip_after.nil?
  end

  # A job on :async whose perform counts in Redis how many of its key run at once ("uq:running"),
  # the most seen ("uq:max") and its runs ("uq:runs").
  def job_class(strategy, **options)
    klass = Class.new(ActiveJob::Base) do
      self.queue_adapter = :async
      def perform(_id, hold)
        redis = Redis.new(url: ENV.fetch("REDIS_URL"))
        now = redis.incr("uq:running")
        redis.eval(UQ_KEEP_MAX, keys: ["uq:max"], argv: [now])
        sleep hold
        redis.incr("uq:runs")
      ensure
        redis&.decr("uq:running")
        redis&.close
      end
    end
    stub_const("UqAsyncJob", klass)
    klass.unique strategy, **{ on_conflict: :log }.merge(options)
    klass
  end

  def wait_for_runs(count)
    wait_until(timeout: 30, what: -> { "#{count} runs (#{redis.get("uq:runs")} so far)" }) do
      redis.get("uq:runs").to_i >= count && redis.get("uq:running").to_i.zero?
    end
  end

  it "until_executed: 8 threads x 40 perform_later of one job; one queued or running at a time, each ran once" do
    klass = job_class(:until_executed)
    enqueued = Queue.new
    Array.new(8) do
      Thread.new do
        40.times do
          job = klass.perform_later(1, 0.02)
          enqueued << job.job_id if job
          sleep 0.005
        end
      end
    end.each(&:join)
    wait_for_runs(enqueued.size)
    expect(enqueued.size).to be_between(2, 319)
    expect(redis.get("uq:runs").to_i).to eq(enqueued.size)
    expect(redis.get("uq:max").to_i).to eq(1)
    expect(redis.keys("activejob_uniqueness:*")).to be_empty
  end

  it "while_executing: duplicates are all enqueued, but never two run at once" do
    refused = Queue.new
    klass = job_class(:while_executing, on_conflict: ->(job) { refused << job.job_id })
    jobs = Array.new(30) { klass.perform_later(1, 0.05) }
    expect(jobs).to all(be_a(klass))
    wait_until(timeout: 30, what: -> { "30 performed or refused (#{redis.get("uq:runs")} + #{refused.size})" }) do
      redis.get("uq:runs").to_i + refused.size == 30 && redis.get("uq:running").to_i.zero?
    end
    expect(redis.get("uq:max").to_i).to eq(1)
    expect(redis.get("uq:runs").to_i).to be_between(1, 29)
  end

  it "a mixed fleet: ferrolock and a Redlock-style process on the same key never run the job at once" do
    klass = job_class(:until_executed)
    key = klass.new(1, 0.01).lock_key
    # The old gem's until_executed, as Redlock does it: SET key <random> NX PX; run; DEL key.
    old_gem = <<~RUBY
      require "redis"
      require "securerandom"
      redis = Redis.new(url: ENV.fetch("REDIS_URL"))
      ran = 0
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 4
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        if redis.set(#{key.dump}, SecureRandom.uuid, nx: true, px: 60_000)
          now = redis.incr("uq:running")
          redis.eval(#{UQ_KEEP_MAX.dump}, keys: ["uq:max"], argv: [now])
          sleep 0.01
          redis.decr("uq:running")
          ran += 1
          redis.del(#{key.dump})
        end
        sleep 0.002
      end
      puts ran
    RUBY
    child = Thread.new { run_ruby!(old_gem, timeout: 30) }
    enqueued = 0
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 4
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      enqueued += 1 if klass.perform_later(1, 0.01)
      sleep 0.002
    end
    old_runs = child.value.to_i
    wait_for_runs(enqueued)
    expect(old_runs).to be_positive
    expect(enqueued).to be_positive
    expect(redis.get("uq:runs").to_i).to eq(enqueued)
    expect(redis.get("uq:max").to_i).to eq(1)
  end
end
