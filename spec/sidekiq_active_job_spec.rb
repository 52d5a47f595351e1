# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"
require "logger"
require "stringio"
require_relative "support/sidekiq_active_job"

# ActiveJob's view of ferrolock's Sidekiq middlewares (ActiveJobHooks), in this process against the
# test Redis: a skipped duplicate is an aborted enqueue, a limiter reschedule is one line of ferrolock's
# (neither an error nor "Performed" for ActiveJob), and ferrolock's log lines give both ids. The jobs
# run as Sidekiq's processor runs them: the server middleware around ActiveJob's JobWrapper#perform,
# on the payload the adapter pushed.
RSpec.describe "Ferrolock::Sidekiq::ActiveJobHooks" do
  let(:redis) { FerrolockTest.redis_server.redis }
  let(:active_job_log) { StringIO.new }
  let(:log) { StringIO.new }

  before(:all) do
    middleware = Ferrolock::Sidekiq::Unique::ClientMiddleware
    FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.add middleware unless chain.exists?(middleware) }
    ActiveJob::Base.queue_adapter = :sidekiq
  end

  after(:all) do
    FerrolockTest::SidekiqVersion.client_middleware do |chain|
      chain.remove(Ferrolock::Sidekiq::Unique::ClientMiddleware)
    end
  end

  around do |example|
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
    previous = [ActiveJob::Base.logger, Ferrolock.config.logger]
    ActiveJob::Base.logger = ActiveSupport::TaggedLogging.new(Logger.new(active_job_log))
    Ferrolock.config.logger = Logger.new(log)
    example.run
  ensure
    ActiveJob::Base.logger, Ferrolock.config.logger = previous
  end

  # An ActiveJob class named `name` with `options` as its sidekiq_options and `body` as its class body.
  def job_class(name, **options, &body)
    klass = Class.new(ActiveJob::Base) do
      queue_as :default
      sidekiq_options(**options) unless options.empty?
    end
    stub_const(name, klass)
    klass.class_eval(&body) if body
    klass
  end

  # Runs the one queued job of `queue` as Sidekiq's processor would: `middleware` around the wrapper's
  # perform. Returns the payload.
  def work_one(middleware, queue: "default")
    payload = Sidekiq::Queue.new(queue).first.item
    Sidekiq::Queue.new(queue).clear
    wrapper = Object.const_get(payload["class"]).new
    wrapper.jid = payload["jid"]
    middleware.call(wrapper, payload, queue) { wrapper.perform(*payload["args"]) }
    payload
  end

  describe "a duplicate the uniqueness middleware skips" do
    it "is an aborted enqueue: perform_later returns false and ActiveJob logs no 'Enqueued'" do
      after_enqueue = []
      klass = job_class("AjUniqueReportJob", lock: :until_executed) do
        after_enqueue { |job| after_enqueue << job.job_id }
        def perform(_id) = nil
      end
      first = klass.perform_later(42)
      second = klass.perform_later(42)
      other = klass.perform_later(7)

      expect(first).to be_a(klass)
      expect(first.provider_job_id).to be_a(String)
      expect(second).to be(false)
      expect(other).to be_a(klass)
      expect(Sidekiq::Queue.new("default").size).to eq(2)
      expect(after_enqueue).to eq([first.job_id, other.job_id])
      expect(active_job_log.string.scan("Enqueued AjUniqueReportJob").size).to eq(2)
      expect(active_job_log.string).to include("Failed enqueuing AjUniqueReportJob to Sidekiq(default), " \
                                               "a before_enqueue callback halted")
      # ferrolock's line names the duplicate by both ids.
      expect(log.string).to match(/AjUniqueReportJob jid=\h+ job_id=[\h-]+ push skipped: unique lock/)
    end

    it "leaves pushes outside an ActiveJob enqueue as they were: a plain Sidekiq push returns nil" do
      klass = Class.new do
        include Sidekiq::Worker
        sidekiq_options lock: :until_executed
        def perform(_id) = nil
      end
      stub_const("AjPlainUniqueJob", klass)
      expect(klass.perform_async(1)).to be_a(String)
      expect(klass.perform_async(1)).to be_nil
    end
  end

  # ActiveJob's retry_job (retry_on, and Rails 8.1 continuations resuming) enqueues the running job again:
  # same job_id, new jid. The until_executed lock passes to the new jid; a real duplicate stays out.
  describe "an until_executed ActiveJob job that enqueues itself again (retry_on)" do
    # Named: ActiveSupport's rescue_from keeps handlers by class name.
    let(:flaky) { stub_const("AjFlakyError", Class.new(StandardError)) }
    let(:ran) { [] }
    let(:klass) do
      error = flaky
      runs = ran
      job_class("AjFlakyReportJob", lock: :until_executed) do
        retry_on error, wait: 1, attempts: 3
        define_method(:perform) do |id|
          runs << executions
          raise error, "first try of #{id}" if executions == 1
        end
      end
    end
    let(:server) { Ferrolock::Sidekiq::Unique::ServerMiddleware.new }

    # The scheduled retry made due now, so work_one finds it in the queue.
    def retry_due
      retry_job = Sidekiq::ScheduledSet.new.first
      expect(retry_job).not_to be_nil, "no retry was scheduled: #{log.string}"
      retry_job.add_to_queue
      retry_job.item
    end

    it "keeps the lock for the retry, which runs; a duplicate meanwhile is refused" do
      job = klass.perform_later(5)
      first = work_one(server)
      retried = retry_due
      expect(retried["jid"]).not_to eq(first["jid"])
      expect(Ferrolock::Sidekiq::ActiveJobHooks.active_job_id(retried)).to eq(job.job_id)
      expect(Ferrolock::Admin.new.uniques("AjFlakyReportJob").items.map(&:jid)).to eq([retried["jid"]])
      expect(klass.perform_later(5)).to be(false)
      expect(log.string).to include("resumes #{first["jid"]}: unique lock")

      work_one(server)
      expect(ran).to eq([1, 2])
      expect(Ferrolock::Admin.new.uniques("AjFlakyReportJob").items).to be_empty
      expect(Sidekiq::Queue.new("default").size + Sidekiq::ScheduledSet.new.size).to eq(0)
      expect(klass.perform_later(5)).to be_a(klass)
    end

    it "still refuses a new perform_later with the same arguments made from inside the running job" do
      error = flaky
      job_class("AjSelfEnqueuerJob", lock: :until_executed) do
        define_method(:perform) { |id| self.class.perform_later(id) || raise(error, "refused") }
      end.perform_later(6)
      expect { work_one(server) }.to raise_error(flaky, "refused")
    end

    it "hands the lock back to the running job when the retry's push does not happen" do
      klass.perform_later(7)
      stopper = Class.new { def call(*) = nil }
      FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.add stopper }
      begin
        first = work_one(server)
        expect(Sidekiq::ScheduledSet.new.size).to eq(0)
        # Retries exhausted or not, the lock is the failed job's again (released when it will not retry).
        expect(Ferrolock::Admin.new.uniques("AjFlakyReportJob").items.map(&:jid)).to all(eq(first["jid"]))
      ensure
        FerrolockTest::SidekiqVersion.client_middleware { |chain| chain.remove(stopper) }
      end
    end
  end

  # A job that cannot be deserialized or loaded fails every retry alike: its lock does not wait for them
  # (Ferrolock::Sidekiq::Unique::Retry; limits_concurrency's slot: spec/active_job_before_perform_spec.rb).
  describe "an until_executed ActiveJob job that fails before it performs" do
    let(:server) { Ferrolock::Sidekiq::Unique::ServerMiddleware.new }
    let(:klass) { job_class("AjPoisonJob", lock: :until_executed) { def perform(_record) = nil } }

    before { require_relative "support/poison_records" }

    def holders = Ferrolock::Admin.new.uniques("AjPoisonJob").items.map(&:jid)

    it "its record deleted: the lock is released as it fails, and a new push is taken" do
      record = LcRecord.create("aj-poison")
      klass.perform_later(record)
      record.destroy
      expect { work_one(server) }.to raise_error(ActiveJob::DeserializationError)
      expect(holders).to be_empty
      expect(klass.perform_later(record)).to be_a(klass)
      expect(log.string).to match(/AjPoisonJob .*failed before it performed \(ActiveJob::DeserializationError/)
    end

    it "its class missing in the worker (NameError): the lock is released as it fails" do
      record = LcRecord.create("aj-gone")
      klass.perform_later(record)
      queued = Sidekiq::Queue.new("default").first.item
      Sidekiq::Queue.new("default").clear
      # The same payload, as a worker without the class reads it.
      queued["wrapped"] = "AjNoSuchJob"
      queued["args"].first["job_class"] = "AjNoSuchJob"
      redis.lpush("queue:default", JSON.generate(queued)) # (no client middleware: the push that was made)
      expect { work_one(server) }.to raise_error(NameError)
      expect(holders).to be_empty
    end

    it "a dual_lock job whose record was deleted leaves the DualLock free as it fails (its ensure)" do
      gone = job_class("AjPoisonDualJob", dual_lock: { key: "aj-poison-dual" }) { def perform(_record) = nil }
      record = LcRecord.create("aj-dual")
      gone.perform_later(record)
      record.destroy
      expect { work_one(Ferrolock::Sidekiq::DualLock::Middleware.new) }.to raise_error(ActiveJob::DeserializationError)
      # Free: the next run enters at once (the middleware's key, as the reschedule example below blocks it).
      expect(Ferrolock::DualLock.new("aj-poison-dual", wait_timeout: 0).run { :ran }).to be(true)
    end

    it "a job that fails in its perform keeps the lock for its retry, as before" do
      failing = job_class("AjPoisonPerformJob", lock: :until_executed) { def perform(_id) = raise(IOError, "x") }
      failing.perform_later(1)
      expect { work_one(server) }.to raise_error(IOError)
      expect(Ferrolock::Admin.new.uniques("AjPoisonPerformJob").items.size).to eq(1)
    end
  end

  describe "perform_all_later (7.1+) of limits_concurrency jobs through Sidekiq's bulk push" do
    after { Ferrolock::ActiveJob::Slots.reset! }

    it "pushes the jobs holding a slot, parks the others in Redis, and a release promotes the next" do
      skip "ActiveJob #{ActiveJob.version} has no perform_all_later" unless ActiveJob.respond_to?(:perform_all_later)

      klass = job_class("AjBulkJob") do
        include Ferrolock::ActiveJob::Concurrency
        limits_concurrency to: 1, key: ->(_num) { "k" }
        def perform(_num) = nil
      end
      jobs = Array.new(3) { |num| klass.new(num) }
      ActiveJob.perform_all_later(jobs)
      queued = -> { Sidekiq::Queue.new("default").map { |entry| entry.args.first["job_id"] } }
      expect(queued.call).to eq([jobs[0].job_id])
      expect(redis.lrange("ferrolock:{concurrency:AjBulkJob/k}:blocked", 0, -1)).to eq(jobs[1, 2].map(&:job_id))
      work_one(Ferrolock::Sidekiq::Unique::ServerMiddleware.new)
      expect(queued.call).to eq([jobs[1].job_id])
    end
  end

  describe "a DualLock::Middleware reschedule (max_wait passed) of an ActiveJob job" do
    it "happens before ActiveJob's perform starts: ActiveJob logs nothing, ferrolock's line gives both ids" do
      klass = job_class("AjSyncJob", dual_lock: { key: "aj-sync", max_wait: 0.3 }) { def perform(_id) = nil }
      job = klass.perform_later(1)
      release = Queue.new
      holder = Thread.new { Ferrolock::DualLock.new("aj-sync").run { release.pop } }
      wait_until { redis.keys("ferrolock:*aj-sync*").any? }
      payload = work_one(Ferrolock::Sidekiq::DualLock::Middleware.new)
      release << true
      holder.join
      expect(Sidekiq::ScheduledSet.new.find_job(payload["jid"])).not_to be_nil
      expect(active_job_log.string).not_to include("Performing AjSyncJob", "Error performing")
      expect(log.string).to include("AjSyncJob jid=#{payload["jid"]} job_id=#{job.job_id} waited 0.3 s",
                                    "rescheduled for")
    end
  end

  describe "a LimiterMiddleware reschedule of an ActiveJob job" do
    let(:limiter) { Ferrolock::ConcurrentLimiter.new("aj-erp", 1, wait_timeout: 0) }

    # Holds the limiter's one slot while the block runs.
    def with_slot_taken
      release = Queue.new
      holder = Thread.new { limiter.within_limit { release.pop } }
      wait_until { limiter.status[:in_use] == 1 }
      yield
    ensure
      release << true
      holder&.join
    end

    def erp_job(&body)
      limiter = self.limiter
      job_class("AjErpJob") do
        define_method(:perform) { |_id| limiter.within_limit { :done } }
        class_eval(&body) if body
      end
    end

    it "is one info line of ferrolock's, with both ids and an honest delay: ActiveJob logs no error, no 'Performed'" do
      job = erp_job.perform_later(1)
      payload = with_slot_taken { work_one(Ferrolock::Sidekiq::LimiterMiddleware.new) }

      expect(active_job_log.string).to include("Performing AjErpJob")
      # The run did not perform, and was not ActiveJob's retry: ActiveJob says nothing of how it ended.
      expect(active_job_log.string).not_to include("Error performing", "Performed AjErpJob", "Retrying AjErpJob")
      scheduled = Sidekiq::ScheduledSet.new.find_job(payload["jid"])
      expect(scheduled.item["args"].first["job_id"]).to eq(job.job_id)
      lines = log.string.lines.grep(/AjErpJob/)
      expect(lines.size).to eq(1), log.string
      ids = "jid=#{payload["jid"]} job_id=#{job.job_id}"
      expect(lines.first).to include(%(INFO -- : ferrolock: AjErpJob #{ids} over limit "aj-erp"; rescheduled for ))
      expect(lines.first)
        .to match(/ s from now \(then picked up at Sidekiq's next scheduled-set poll, about every [\d.]+ s\) /)
      expect(lines.first).to include("s) (1/20)")
    end

    it "lets ActiveJob log 'Performed' for the same job's next run, once it gets a slot" do
      erp_job.perform_later(1)
      with_slot_taken { work_one(Ferrolock::Sidekiq::LimiterMiddleware.new) }
      expect(active_job_log.string).not_to include("Performed AjErpJob")
      rescheduled = Sidekiq::ScheduledSet.new.first.item
      Sidekiq::ScheduledSet.new.clear
      Sidekiq::Client.push(rescheduled.merge("queue" => "default").except("at"))
      work_one(Ferrolock::Sidekiq::LimiterMiddleware.new)
      expect(active_job_log.string.scan("Performed AjErpJob").size).to eq(1), active_job_log.string
    end

    it "goes to Sidekiq's retry once max_reschedules is reached, an error for ActiveJob too" do
      erp_job.perform_later(1)
      with_slot_taken do
        expect { work_one(Ferrolock::Sidekiq::LimiterMiddleware.new(max_reschedules: 0)) }
          .to raise_error(Ferrolock::OverLimit)
      end
      expect(Sidekiq::ScheduledSet.new.size).to eq(0)
      expect(active_job_log.string).to include("Error performing AjErpJob")
      expect(active_job_log.string).not_to include("Retrying AjErpJob")
      expect(log.string.scan("Sidekiq's retry takes over").size).to eq(1)
    end

    it "leaves an OverLimit the job rescues itself (rescue_from) to the job" do
      rescued = []
      erp_job { rescue_from(Ferrolock::OverLimit) { |error| rescued << error.class } }.perform_later(1)
      with_slot_taken { work_one(Ferrolock::Sidekiq::LimiterMiddleware.new) }
      expect(rescued).to eq([Ferrolock::OverLimit])
      expect(Sidekiq::ScheduledSet.new.size).to eq(0)
    end

    it "raises an OverLimit of a job run inline (perform_now, no middleware) as before" do
      with_slot_taken { expect { erp_job.perform_now(1) }.to raise_error(Ferrolock::OverLimit) }
    end
  end
end
