# frozen_string_literal: true

require "logger"
require "stringio"
require "active_job"

# Ferrolock::ActiveJob::DualLock, the `dual_lock` macro, on ActiveJob's :async adapter (jobs run on its
# thread pool in this process) against the test Redis: per key one job runs and one waits, a further
# duplicate is skipped, the waiting one always runs after the running one, and one that waited past
# wait_timeout is enqueued again for later, never dropped. (The macro in real Sidekiq processes:
# spec/active_job_uniqueness_processes_spec.rb.)
RSpec.describe "ActiveJob dual_lock", time_limit: 60 do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:log) { StringIO.new }

  around do |example|
    previous = [ActiveJob::Base.logger, Ferrolock.config.logger]
    ActiveJob::Base.logger = Logger.new(nil)
    Ferrolock.config.logger = Logger.new(log)
    example.run
  ensure
    ActiveJob::Base.logger, Ferrolock.config.logger = previous
  end

  # A job on :async under `dual_lock(**options)`, keyed on its first argument, whose
  # perform(id, n, hold) appends "start n" and "end n" to the Redis list "dl:log".
  def job_class(name = "DlJob", **options, &body)
    klass = Class.new(ActiveJob::Base) do
      include Ferrolock::ActiveJob::DualLock
      # (More threads than :async's default of one per core: every duplicate gets to start at once.)
      self.queue_adapter = ActiveJob::QueueAdapters::AsyncAdapter.new(min_threads: 8, max_threads: 8)
      def perform(_id, num, hold)
        redis = Redis.new(url: ENV.fetch("REDIS_URL"))
        redis.rpush("dl:log", "start #{num}")
        sleep hold
        redis.rpush("dl:log", "end #{num}")
      ensure
        redis&.close
      end

      def self.dual_lock_key(id, *) = "dl:#{id}"
    end
    stub_const(name, klass)
    klass.class_eval(&body) if body
    klass.dual_lock(**options)
    klass
  end

  def entries = redis.lrange("dl:log", 0, -1)

  def wait_for(count)
    wait_until(timeout: 20, what: -> { "#{count} ends in #{entries}" }) do
      entries.count do |e|
        e.start_with?("end")
      end >= count
    end
  end

  it "runs one, keeps one waiting, skips the rest; the waiting one runs after the running one ends" do
    klass = job_class
    klass.perform_later(1, 1, 1.0)
    wait_until(timeout: 10, what: "the first to start") { entries == ["start 1"] }
    klass.perform_later(1, 2, 0.1) # waits
    sleep 0.3
    klass.perform_later(1, 3, 0.1) # skipped: 2 waits
    klass.perform_later(1, 4, 0.1) # skipped
    klass.perform_later(2, 5, 0.1) # another key: runs at once
    wait_for(3)
    sleep 0.5 # (nothing else may start)
    runs = entries
    expect(runs.first(2)).to eq(["start 1", "start 5"])
    expect(runs.index("start 2")).to be > runs.index("end 1")
    expect(runs).not_to include("start 3", "start 4")
    expect(runs.size).to eq(6)
    expect(log.string.scan("skipped: a duplicate already waits").size).to eq(2)
  end

  it "enqueues a job that waited past wait_timeout again (backoff:), which then runs: never dropped" do
    events = []
    subscription = Ferrolock.subscribe(:rescheduled) { |_, payload| events << payload.slice(:key, :count, :delay) }
    klass = job_class(wait_timeout: 0.2, backoff: ->(_lock, _job, _error) { 0.3 })
    klass.perform_later(1, 1, 1.5)
    wait_until(timeout: 10, what: "the first to start") { entries == ["start 1"] }
    klass.perform_later(1, 2, 0.1)
    wait_for(2)
    runs = entries
    expect(runs.index("start 2")).to be > runs.index("end 1")
    expect(events.size).to be >= 1
    expect(events.first).to include(count: 1, delay: 0.3)
    expect(events.map { |e| e[:count] }).to eq((1..events.size).to_a) # the counter travels with the job
    expect(log.string).to include("enqueued again to run in 0.3 s")
  ensure
    Ferrolock.unsubscribe(subscription) if subscription
  end

  it "keys a job by the class's dual_lock_key, defined before or after the macro" do
    klass = job_class("DlKeyedJob") { def self.dual_lock_key(id, *) = "record:#{id}" }
    later = Class.new(ActiveJob::Base) { include Ferrolock::ActiveJob::DualLock }
    stub_const("DlLaterJob", later)
    later.dual_lock(wait_timeout: 1)
    later.define_singleton_method(:dual_lock_key) { |id, *| "later:#{id}" }
    expect(later.ferrolock_dual_lock.key_for(later.new(7, 1))).to eq("later:7")
    expect(klass.ferrolock_dual_lock.key_for(klass.new(7, 1, 0))).to eq("record:7")
    default = Class.new(ActiveJob::Base) { include Ferrolock::ActiveJob::DualLock }
    stub_const("DlDefaultJob", default)
    default.dual_lock
    expect(default.ferrolock_dual_lock.key_for(default.new(7, 1, 0))).to match(/\ADlDefaultJob:\h{64}\z/)
  end

  it "checks its options when the macro runs, naming the class" do
    klass = Class.new(ActiveJob::Base) { include Ferrolock::ActiveJob::DualLock }
    stub_const("DlBadJob", klass)
    expect { klass.dual_lock(wait_timeout: -1) }.to raise_error(ArgumentError, /DlBadJob: dual_lock wait_timeout/)
    expect { klass.dual_lock(leese: 5) }.to raise_error(ArgumentError, /DlBadJob: unknown dual_lock option :leese/)
    expect { klass.dual_lock(key: -> { "x" }) }.to raise_error(ArgumentError, /define `def self.dual_lock_key/)
    expect { klass.dual_lock(backoff: 5) }.to raise_error(TypeError, /backoff must respond to #call/)
  end
end
