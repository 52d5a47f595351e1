# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"
require "logger"
require "stringio"

RSpec.describe Ferrolock::Sidekiq::LimiterMiddleware do
  let(:app) { "spec/fixtures/limiter_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }

  before do
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
  end

  def push(klass, *args)
    Sidekiq::Client.push("class" => klass, "args" => args, "queue" => "default")
  end

  # Holds every slot of `limiter` in background threads until the returned lambda is called.
  def hold_slots(limiter, count = limiter.count)
    release = Queue.new
    threads = Array.new(count) { Thread.new { limiter.within_limit(wait_timeout: 5) { release.pop } } }
    wait_until { limiter.status[:in_use] == count }
    lambda {
      count.times { release << true }
      threads.each(&:join)
    }
  end

  describe "with a real Sidekiq process" do
    it "keeps the incident from happening: 3 s blocks, lock_timeout 1 s, never more than 3 inside" do
      limiter = Ferrolock::ConcurrentLimiter.new("incident", 3)
      with_sidekiq(app, concurrency: 5) do |sidekiq|
        20.times { |i| push("IncidentJob", i) }
        samples = []
        deadline = monotonic + 90
        until redis.scard("incident:done") == 20
          raise "jobs did not finish:\n#{sidekiq.log}" if monotonic > deadline

          samples << [limiter.status, redis.get("incident:inside").to_i]
          sleep 0.05
        end
        expect(samples.map { |status, _| status[:in_use] }.max).to eq(3)
        expect(samples.map { |_, inside| inside }.max).to eq(3)
        expect(redis.get("incident:max").to_i).to eq(3)
        # 5 threads, 3 slots: the other 2 threads waited for theirs.
        expect(samples.map { |status, _| status[:waiting] }.max).to be_between(1, 2)
        expect(sidekiq.log).not_to include("OverLimit")
      end
    end

    it "frees a kill -9'ed Sidekiq process's slots within lock_timeout + 1 s" do
      limiter = Ferrolock::ConcurrentLimiter.new("hog", 3, wait_timeout: 10, lock_timeout: 2)
      sidekiq = FerrolockTest::SidekiqProcess.new(app, concurrency: 3).start
      begin
        3.times { push("HogJob") }
        wait_until(timeout: 15) { limiter.status[:in_use] == 3 }
        sleep 2.5 # past lock_timeout: renewal keeps the slots while the process lives
        expect(limiter.status[:in_use]).to eq(3)
        Process.kill("KILL", -sidekiq.pid)
      ensure
        sidekiq.stop
      end
      took = elapsed do
        Array.new(3) { Thread.new { limiter.within_limit { nil } } }.each(&:join)
      end
      expect(took).to be < 3.0
    end

    it "reschedules a job that hit OverLimit (later, in the schedule set) and then runs it" do
      release = hold_slots(Ferrolock::ConcurrentLimiter.new("strict", 1))
      with_sidekiq(app, concurrency: 2, env: { "LIMITER_BACKOFF" => "2" }) do
        pushed_at = Time.now.to_f
        jid = push("StrictJob", "a")
        entry = wait_until(timeout: 10) { Sidekiq::ScheduledSet.new.find_job(jid) }
        expect(entry.at.to_f).to be > pushed_at + 1.5
        expect(entry.item[Ferrolock::Sidekiq::LimiterMiddleware::COUNTER]).to eq(1)
        expect(entry.item["retry_count"]).to be_nil
        expect(redis.lrange("backoff:calls", 0, -1)).to eq(["strict #{jid} Ferrolock::OverLimit"])
        release.call
        wait_until(timeout: 20) { redis.lrange("strict:ran", 0, -1) == ["a"] }
        expect(Sidekiq::RetrySet.new.size).to eq(0)
      end
    end

    it "hands the job to Sidekiq's retry after max_reschedules" do
      release = hold_slots(Ferrolock::ConcurrentLimiter.new("strict", 1))
      env = { "LIMITER_BACKOFF" => "0.2", "LIMITER_MAX_RESCHEDULES" => "2" }
      with_sidekiq(app, concurrency: 2, env: env) do
        jid = push("StrictJob", "b")
        entry = wait_until(timeout: 30) { Sidekiq::RetrySet.new.find_job(jid) }
        expect(entry.item[Ferrolock::Sidekiq::LimiterMiddleware::COUNTER]).to eq(2)
        expect(entry.item["error_class"]).to eq("Ferrolock::OverLimit")
        expect(redis.llen("backoff:calls")).to eq(2)
        expect(redis.lrange("strict:ran", 0, -1)).to eq([])
      end
      release.call
    end
  end

  describe "with a RateLimiter in a real Sidekiq process" do
    it "reschedules over-limit jobs to the next window (retry_after beats a 0.1 s backoff), 2 per window" do
      with_sidekiq(app, concurrency: 5, env: { "LIMITER_BACKOFF" => "0.1" }) do
        4.times { |i| push("PacedJob", i) }
        wait_until(timeout: 40) { redis.llen("paced:ran") == 4 }
        runs = redis.lrange("paced:ran", 0, -1).map { |line| line.split.last.to_f }
        # Windows are aligned to Redis time: window k is [5k, 5k + 5).
        expect(runs.group_by { |at| (at / 5).floor }.values.map(&:size).max).to be <= 2
        expect(runs.map { |at| (at / 5).floor }.uniq.size).to be >= 2
        # Each refused job came back once its window had ended: one reschedule each, at most 2
        # jobs refused. A 0.1 s delay would bring them back (about 1 s, Sidekiq's poll) into the
        # same 5 s window, to be refused again.
        calls = redis.lrange("backoff:calls", 0, -1)
        expect(calls.size).to be_between(1, 2)
        expect(calls).to all(start_with("paced "))
        expect(Sidekiq::RetrySet.new.size).to eq(0)
      end
    end
  end

  describe "in this process (pushes to the real test Redis)" do
    let(:limiter) { Ferrolock::ConcurrentLimiter.new("inline", 1, wait_timeout: 0) }
    let(:job) { { "class" => "SomeJob", "jid" => "abc123", "args" => [1], "queue" => "default", "retry" => true } }
    let(:log) { StringIO.new }

    around do |example|
      previous = Ferrolock.config.logger
      Ferrolock.config.logger = Logger.new(log)
      example.run
    ensure
      Ferrolock.config.logger = previous
    end

    def over_limit
      limiter.within_limit { limiter.within_limit { nil } }
    end

    it "passes the job's value and other errors through untouched" do
      middleware = described_class.new
      expect(middleware.call(nil, job, "default") { :done }).to eq(:done)
      expect { middleware.call(nil, job, "default") { raise "boom" } }.to raise_error(RuntimeError, "boom")
      expect(Sidekiq::ScheduledSet.new.size).to eq(0)
    end

    it "reschedules with the default growing backoff and emits :rescheduled" do
      events = []
      sub = Ferrolock.subscribe(:rescheduled) { |_, payload| events << payload }
      middleware = described_class.new
      middleware.call(nil, job.merge(described_class::COUNTER => 3), "default") { over_limit }
      Ferrolock.unsubscribe(sub)
      entry = Sidekiq::ScheduledSet.new.find_job("abc123")
      expect(entry.item[described_class::COUNTER]).to eq(4)
      # Reschedule.backoff(4): 8 s plus up to 50 % jitter.
      expect(entry.at.to_f - Time.now.to_f).to be_between(7, 12.5)
      expect(events.first).to include(name: "inline", jid: "abc123", count: 4, reason: :over_limit)
      # Due in the delay, run at the scheduler's next poll after that: the line says both.
      expect(log.string).to include('SomeJob abc123 over limit "inline"; rescheduled for ',
                                    " s from now (then picked up at Sidekiq's next scheduled-set poll, about every " \
                                    "5.0 s) (4/20)")
      expect(Float(log.string[/rescheduled for (\S+) s/, 1])).to be_within(0.5).of(entry.at.to_f - Time.now.to_f)
    end

    it "names the wrapped class of an ActiveJob job in events and log lines, not JobWrapper" do
      events = []
      sub = Ferrolock.subscribe(:rescheduled, :reschedules_exhausted) { |event, payload| events << [event, payload] }
      wrapped = job.merge("class" => "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper",
                          "wrapped" => "ErpSyncJob",
                          "args" => [{ "job_class" => "ErpSyncJob", "job_id" => "aj-42", "arguments" => [1] }])
      described_class.new.call(nil, wrapped, "default") { over_limit }
      expect { described_class.new(max_reschedules: 0).call(nil, wrapped, "default") { over_limit } }
        .to raise_error(Ferrolock::OverLimit)
      Ferrolock.unsubscribe(sub)
      expect(events.map { |event, payload| [event, payload[:class]] })
        .to eq([%i[rescheduled], %i[reschedules_exhausted]].map { |(event)| [event, "ErpSyncJob"] })
      # Both ids: Sidekiq's jid and ActiveJob's job id (which ActiveJob's own log lines give).
      expect(log.string).to include('ErpSyncJob jid=abc123 job_id=aj-42 over limit "inline"; rescheduled for',
                                    'ErpSyncJob jid=abc123 job_id=aj-42 over limit "inline" after 0 reschedules')
      expect(log.string).not_to include("JobWrapper")
    end

    it "re-raises once the job's own cap (sidekiq_options ferrolock_max_reschedules) is reached" do
      middleware = described_class.new(max_reschedules: 50)
      capped = job.merge(described_class::COUNTER => 1, described_class::JOB_OPTION => 1)
      expect { middleware.call(nil, capped, "default") { over_limit } }.to raise_error(Ferrolock::OverLimit)
      expect(log.string).to include("after 1 reschedules; Sidekiq's retry takes over")
      expect(Sidekiq::ScheduledSet.new.size).to eq(0)
    end

    it "never reschedules a RateLimiter's job before its retry_after, whatever the backoff says" do
      events = []
      sub = Ferrolock.subscribe(:rescheduled) { |_, payload| events << payload }
      daily = Ferrolock::RateLimiter.window("daily", 1, :day, wait_timeout: 0)
      daily.within_limit { nil }
      middleware = described_class.new(backoff: ->(_limiter, _job, _ex) { 0.1 })
      middleware.call(nil, job, "default") { daily.within_limit { nil } }
      Ferrolock.unsubscribe(sub)
      entry = Sidekiq::ScheduledSet.new.find_job("abc123")
      # The window ends at the next midnight of Redis time (UTC).
      seconds = Ferrolock.client.call("TIME").first.to_i
      expect(entry.at.to_f - Time.now.to_f).to be_within(5).of(86_400 - (seconds % 86_400))
      expect(events.first).to include(primitive: :rate_limiter, kind: :window, name: "daily")
    end

    it "keeps the ConcurrentLimiter's events as they were (retry_after nil: the backoff alone)" do
      events = []
      sub = Ferrolock.subscribe(:rescheduled) { |_, payload| events << payload }
      described_class.new(backoff: ->(_limiter, _job, _ex) { 0.5 }).call(nil, job, "default") { over_limit }
      Ferrolock.unsubscribe(sub)
      expect(events.first).to include(primitive: :concurrent_limiter, delay: 0.5)
      expect(events.first).not_to have_key(:kind)
    end

    it "falls back to the default backoff when the proc answers nonsense" do
      middleware = described_class.new(backoff: ->(_limiter, _job, _ex) { "soon" })
      middleware.call(nil, job, "default") { over_limit }
      entry = Sidekiq::ScheduledSet.new.find_job("abc123")
      expect(entry.at.to_f - Time.now.to_f).to be_between(0, 2)
    end

    it "rejects bad options, naming them" do
      expect { described_class.new(max_reschedules: -1) }.to raise_error(ArgumentError, /max_reschedules/)
      expect { described_class.new(max_reschedules: "3") }.to raise_error(TypeError, /max_reschedules/)
      expect { described_class.new(backoff: 5) }.to raise_error(TypeError, /backoff/)
      expect { described_class.new(retries: 5) }.to raise_error(ArgumentError, /retries/)
    end
  end
end
