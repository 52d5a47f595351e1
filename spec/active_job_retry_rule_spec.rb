# frozen_string_literal: true

require "logger"
require_relative "support/active_job_jobs"

# The retry rule of limits_concurrency, the same on ActiveJob 6.1 (host), 7.2 (modern) and 8.1
# (FERROLOCK_RAILS=8.1), whose retry_job differ (6.1 enqueues the job itself, 7.2 a copy, 8.1 itself
# and restores its scheduled_at): a retry made once the run failed (retry_on, a rescue_from handler
# calling retry_job) does not keep the slot. The slot is given back as that run ends, the next blocked
# job is promoted at once, and the retry takes a slot or is blocked when it is admitted, like any job.
# Only a job that enqueues itself while its perform still runs (a continuation's resumption, retry_job
# inside perform) keeps its slot: it never waits behind itself.
RSpec.describe "ActiveJob limits_concurrency: a retry gives its slot back", time_limit: 30 do
  let(:redis) { FerrolockTest.redis_server.redis }

  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  include FerrolockTest::ActiveJobJobs

  around { |example| with_loggers { example.run } }

  def slots(key) = redis.zrange("ferrolock:{concurrency:#{key}}:slots", 0, -1)

  def blocked(key) = redis.lrange("ferrolock:{concurrency:#{key}}:blocked", 0, -1)

  # Job 0 fails its first run; `retrying` is the class body's way to retry it.
  def failing_class(name, &retrying)
    job_class(name, to: 1, key: ->(_num) { "k" }, duration: 60) do
      class_eval(&retrying)

      define_method(:perform) do |num|
        LC_RAN << [num, executions]
        raise IOError, "first run fails" if num.zero? && executions == 1
      end
    end
  end

  {
    "retry_on with a wait" => proc { retry_on IOError, wait: 30, attempts: 3 },
    "retry_on with wait: 0" => proc { retry_on IOError, wait: 0, attempts: 3 },
    "rescue_from calling retry_job (no wait)" => proc { rescue_from(IOError) { retry_job } }
  }.each_with_index do |(how, retrying), index|
    it "#{how}: the failed run's slot goes to the next blocked job; the retry is admitted like any job" do
      klass = failing_class("RrRetryJob#{index}", &retrying)
      first = klass.perform_later(0)
      second = klass.perform_later(1)
      run_queued(klass) # 0 fails; its retry is enqueued
      expect(slots("RrRetryJob#{index}/k")).to eq([second.job_id])
      queued = queue(klass).map { |job| job["job_id"] }
      # The promoted job is queued; the retry is queued to be checked when it runs (scheduled) or is
      # blocked behind the jobs already waiting (enqueued now, the key full).
      expect(queued.first).to eq(second.job_id)
      expect(queued.drop(1) + blocked("RrRetryJob#{index}/k")).to eq([first.job_id])
      work_off(klass)
      expect(ran).to eq([[0, 1], [1, 1], [0, 2]])
      expect(slots("RrRetryJob#{index}/k") + blocked("RrRetryJob#{index}/k")).to be_empty
    end
  end

  it "a job that enqueues itself while its perform runs keeps its slot (it never waits behind itself)" do
    klass = job_class("RrResumeJob", to: 1, key: ->(_num) { "k" }, duration: 60) do
      def perform(num)
        LC_RAN << [num, executions]
        retry_job if num.zero? && executions == 1 # inside perform: a resumption
      end
    end
    first = klass.perform_later(0)
    second = klass.perform_later(1)
    run_queued(klass)
    expect(slots("RrResumeJob/k")).to eq([first.job_id])
    expect(blocked("RrResumeJob/k")).to eq([second.job_id])
    work_off(klass)
    expect(ran).to eq([[0, 1], [0, 2], [1, 1]])
  end
end
