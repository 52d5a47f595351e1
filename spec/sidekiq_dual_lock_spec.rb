# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

RSpec.describe Ferrolock::Sidekiq::DualLock::Middleware do
  let(:app) { "spec/fixtures/dual_lock_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }

  before do
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
  end

  def push(klass, *args, queue: "default")
    Sidekiq::Client.push("class" => klass, "args" => args, "queue" => queue)
  end

  def redis_now
    sec, usec = redis.time
    sec + (usec / 1e6)
  end

  # Entries "<word> … <time>" of a list written by DualLockProbe: [[words…, time], …].
  def records(list)
    redis.lrange(list, 0, -1).map do |entry|
      *words, time = entry.split
      [*words, Float(time)]
    end
  end

  def events
    redis.lrange("events", 0, -1).map(&:split)
  end

  def no_failures!(sidekiq)
    expect(Sidekiq::RetrySet.new.size).to eq(0), sidekiq.log
    expect(Sidekiq::DeadSet.new.size).to eq(0), sidekiq.log
  end

  describe "with a real Sidekiq process" do
    it "runs the first, makes the second wait then run, skips the third (arrivals 0, 0.1, 0.3 s)" do
      with_sidekiq(app, concurrency: 3) do |sidekiq|
        jids = [["a", 0], ["b", 0.1], ["c", 0.2]].map do |tag, pause|
          sleep pause
          push("OriginalJob", 42, tag)
        end
        wait_until(timeout: 20) { redis.llen("orig:ends") == 2 && redis.llen("events") == 1 }
        sleep 0.5 # a third run would have started by now
        starts = records("orig:starts")
        ends = records("orig:ends").to_h
        expect(starts.map(&:first)).to eq(%w[a b])
        expect(starts[1][1]).to be >= ends["a"]
        # Woken by the release, not by a timer (OriginalJob's wait_timeout: 10 s, its lease 60 s).
        expect(starts[1][1] - ends["a"]).to be < 2
        expect(events).to eq([["skipped", jids[2], "orig:42"]])
        expect(sidekiq.log).to match(/OriginalJob #{jids[2]} skipped: a duplicate already waits/)
        no_failures!(sidekiq)
      end
    end

    it "mirrors the last of 200 rapid updates with only a handful of runs" do
      with_sidekiq(app, concurrency: 5) do |sidekiq|
        200.times do |i|
          redis.set("record:42", i.to_s)
          push("SyncRecordJob", 42)
        end
        last_push = redis_now
        wait_until(timeout: 60) do
          Sidekiq::Queue.new.size.zero? && redis.llen("sync:starts") + redis.llen("events") == 200
        end
        starts = records("sync:starts").map(&:last)
        wait_until(timeout: 5) { redis.get("mirror:42") == "199" }
        expect(starts.size).to be_between(2, 40)
        expect(starts.max).to be >= last_push # the last run started after the last update
        expect(events.map(&:first).uniq).to eq(["skipped"])
        expect(events.map { |e| e[2] }.uniq).to eq(["SyncRecordJob:#{Digest::SHA256.hexdigest("[42]")}"])
        no_failures!(sidekiq)
      end
    end

    it "lets a duplicate run within exec_ttl after the running Sidekiq process got kill -9" do
      doomed = FerrolockTest::SidekiqProcess.new(app, concurrency: 2, queues: ["doomed"])
      survivor = FerrolockTest::SidekiqProcess.new(app, concurrency: 2, queues: ["survivor"])
      [Thread.new { doomed.start }, Thread.new { survivor.start }].each(&:join)
      begin
        push("SlowJob", 7, 60, queue: "doomed")
        wait_until(timeout: 15) { redis.llen("slow:starts") == 1 }
        Process.kill("KILL", -doomed.pid)
        killed_at = redis_now
        push("SlowJob", 7, 0, queue: "survivor")
        wait_until(timeout: 15) { redis.llen("slow:ends") == 1 }
        (first_pid,), (second_pid, second_start) = records("slow:starts")
        expect(first_pid.to_i).to eq(doomed.pid)
        expect(second_pid.to_i).to eq(survivor.pid)
        # The lease (exec_ttl 3 s) was renewed every second until the kill, then expired.
        expect(second_start - killed_at).to be_between(1.5, 6)
        expect(events).to eq([])
      ensure
        doomed.stop
        survivor.stop
      end
    end

    it "reschedules a job that waited past wait_timeout instead of failing or dropping it" do
      with_sidekiq(app, concurrency: 3) do |sidekiq|
        holder = push("ImpatientJob", 1, 3)
        wait_until(timeout: 15) { redis.llen("impatient:ran") == 1 }
        waiter = push("ImpatientJob", 1, 0)
        wait_until(timeout: 30) { redis.llen("impatient:ran") == 2 }
        ran = records("impatient:ran")
        expect(ran.map(&:first)).to eq([holder, waiter])
        expect(ran[1].last - ran[0].last).to be >= 3
        rescheduled = events.select { |e| e.first == "rescheduled" }
        expect(rescheduled).not_to be_empty
        expect(rescheduled.map { |e| e[1] }.uniq).to eq([waiter])
        expect(rescheduled.map { |e| e[3].to_i }).to eq((1..rescheduled.size).to_a)
        expect(rescheduled.map(&:last).uniq).to eq(["wait_timeout"]) # the option's name, as in the :wait_timeout event
        expect(sidekiq.log).to include("rescheduled for")
        no_failures!(sidekiq)
      end
    end

    it "fails the first job of a class with bad dual_lock options, naming the class, without running it" do
      with_sidekiq(app, concurrency: 3) do |sidekiq|
        %w[ZeroTtlJob UnknownOptionJob RaisingKeyJob].each { |klass| push(klass) }
        push("PlainJob", "untouched")
        wait_until(timeout: 20) { Sidekiq::RetrySet.new.size == 3 }
        failures = Sidekiq::RetrySet.new.to_h { |job| [job.klass, [job["error_class"], job["error_message"]]] }
        expect(failures["ZeroTtlJob"])
          .to eq(["ArgumentError", "ZeroTtlJob: dual_lock exec_ttl must be positive, got 0.0"])
        expect(failures["UnknownOptionJob"][0]).to eq("ArgumentError")
        expect(failures["UnknownOptionJob"][1]).to match(/UnknownOptionJob: unknown dual_lock option :ttl/)
        expect(failures["RaisingKeyJob"][0]).to eq("Ferrolock::Error")
        expect(failures["RaisingKeyJob"][1])
          .to eq("RaisingKeyJob.dual_lock_key raised KeyError: no such record")
        wait_until(timeout: 10) { redis.llen("plain:ran") == 1 }
        expect(redis.llen("bad:ran")).to eq(0)
        expect(sidekiq.log).to include("ZeroTtlJob")
      end
    end

    it "locks ActiveJob jobs on the wrapped class and its arguments; enqueueing needs no ferrolock" do
      with_sidekiq(app, concurrency: 3) do |sidekiq|
        run_ruby!(<<~RUBY)
          require "active_job"
          require "sidekiq"
          require #{File.expand_path("support/sidekiq_active_job", __dir__).dump} # Sidekiq 7.3's wrapper
          Sidekiq.configure_client { |c| c.redis = { url: ENV["REDIS_URL"] } }
          ActiveJob::Base.queue_adapter = :sidekiq
          ActiveJob::Base.logger = Logger.new(nil)
          class MirrorActiveJob < ActiveJob::Base
            def perform(id); end
          end
          abort "ferrolock was loaded" if defined?(Ferrolock)
          MirrorActiveJob.perform_later(42)
          sleep 0.2
          MirrorActiveJob.perform_later(42)
          MirrorActiveJob.perform_later(42)
          MirrorActiveJob.perform_later(7)
        RUBY
        wait_until(timeout: 20) { redis.llen("aj:starts") == 3 && redis.llen("events") == 1 }
        sleep 0.7 # a fourth run would have started by now
        expect(records("aj:starts").map(&:first).sort).to eq(%w[42 42 7])
        expect(events.size).to eq(1)
        expect(events[0][2]).to start_with("MirrorActiveJob:")
        no_failures!(sidekiq)
      end
    end
  end

  describe "without a server" do
    let(:middleware) { described_class.new }

    def job_class(options)
      Class.new do
        include Sidekiq::Worker
        sidekiq_options(options)
        def self.name = "ProbeJob"
      end
    end

    it "passes jobs of classes that did not opt in through untouched" do
      klass = job_class(queue: "default")
      result = middleware.call(klass.new, { "class" => "ProbeJob", "args" => [1], "jid" => "j" }, "default") { :done }
      expect(result).to eq(:done)
      expect(redis.keys("*")).to be_empty
    end

    it "validates every loaded class with a dual_lock option at boot, naming the bad one" do
      named_job = ->(options) { Class.new { include Sidekiq::Worker }.tap { |k| k.sidekiq_options(options) } }
      stub_const("BootCheckedJob", named_job.call(dual_lock: { exec_ttl: 0 }))
      expect { described_class.validate! }.to raise_error(ArgumentError, /BootCheckedJob.*exec_ttl/)
      stub_const("BootCheckedJob", named_job.call(dual_lock: { exec_ttl: 5 }))
      expect(described_class.validate!).to be(true)
    end

    it "validates options when asked, naming the class" do
      expect(described_class.validate!(job_class(dual_lock: true))).to be(true)
      expect { described_class.validate!(job_class(dual_lock: "yes")) }
        .to raise_error(ArgumentError, /ProbeJob: sidekiq_options dual_lock: must be true or a Hash/)
      expect { described_class.validate!(job_class(dual_lock: { wait_ttl: -1 })) }
        .to raise_error(ArgumentError, /ProbeJob: dual_lock wait_ttl must be positive/)
      expect { described_class.validate!(job_class(dual_lock: { max_wait: "30" })) }
        .to raise_error(TypeError, /ProbeJob: dual_lock max_wait/)
      expect { described_class.validate!(job_class(dual_lock: { key: "a{b}" })) }
        .to raise_error(ArgumentError, /ProbeJob: dual_lock key/)
      expect { described_class.new(backoff: 5) }.to raise_error(TypeError, /backoff/)
      expect { described_class.new(retries: 5) }
        .to raise_error(ArgumentError, /DualLock::Middleware: unknown option :retries \(known: client, backoff\)/)
    end

    it "passes the DualLock, the job and the TimeoutError to a backoff, as the limiter's (->(count) works too)" do
      klass = job_class(dual_lock: { key: "backoff-probe", max_wait: 0.05 })
      held = Queue.new
      holder = Thread.new { Ferrolock::DualLock.new("backoff-probe").run { (held << true) && sleep(1.5) } }
      held.pop
      calls = []
      three = described_class.new(backoff: ->(lock, job, ex) { (calls << [lock.key, job["jid"], ex.class]) && 7 })
      one = described_class.new(backoff: ->(count) { (calls << count) && 9 })
      three.call(klass.new, { "class" => "ProbeJob", "args" => [1], "jid" => "j3", "queue" => "default" }, "default") do
        raise "must not run"
      end
      one.call(klass.new, { "class" => "ProbeJob", "args" => [1], "jid" => "j1", "queue" => "default" }, "default") do
        raise "must not run"
      end
      expect(calls).to eq([["backoff-probe", "j3", Ferrolock::TimeoutError], 1])
      delays = redis.zrange("schedule", 0, -1, with_scores: true).to_h do |payload, at|
        [JSON.parse(payload)["jid"], at - Time.now.to_f]
      end
      expect(delays.keys).to contain_exactly("j3", "j1")
      expect(delays["j3"]).to be_within(2).of(7)
      expect(delays["j1"]).to be_within(2).of(9)
    ensure
      holder&.join(5)
    end

    it "gives the same default key for the same arguments in any hash order" do
      settings = Ferrolock::Sidekiq::DualLock::Settings.new(job_class(dual_lock: true), true)
      a = settings.key_for([1, { "x" => 1, "y" => [{ "b" => 2, "a" => 1 }] }])
      b = settings.key_for([1, { "y" => [{ "a" => 1, "b" => 2 }], "x" => 1 }])
      expect(a).to eq(b)
      expect(a).to match(/\AProbeJob:\h{64}\z/)
      expect(settings.key_for([2])).not_to eq(settings.key_for([1]))
    end

    it "reports a dual_lock_key that returns nonsense as a Ferrolock::Error naming the class" do
      klass = job_class({})
      klass.define_singleton_method(:dual_lock_key) { |*| [] }
      settings = Ferrolock::Sidekiq::DualLock::Settings.new(klass, true)
      expect { settings.key_for([1]) }.to raise_error(Ferrolock::Error, /ProbeJob.dual_lock_key must return/)
    end

    it "takes a key from the class's dual_lock_key, or a fixed key:, but refuses a key: proc" do
      klass = job_class({})
      klass.define_singleton_method(:dual_lock_key) { |id, *| "record:#{id}" }
      expect(Ferrolock::Sidekiq::DualLock::Settings.new(klass, true).key_for([7, "x"])).to eq("record:7")
      expect(Ferrolock::Sidekiq::DualLock::Settings.new(job_class({}),
                                                        { key: "reindex" }).key_for([1])).to eq("reindex")
      expect { described_class.validate!(job_class(dual_lock: { key: ->(id) { id.to_s } })) }
        .to raise_error(ArgumentError, /ProbeJob: a dual_lock key: proc .*def self.dual_lock_key/)
      expect { Ferrolock::Sidekiq::DualLock::Settings.new(klass, { key: "fixed" }) }
        .to raise_error(ArgumentError, /ProbeJob: give either dual_lock key: or self.dual_lock_key/)
    end

    it "keeps the job payload JSON-clean: only sidekiq_options' plain values reach Redis" do
      klass = job_class(dual_lock: { max_wait: 5 })
      klass.define_singleton_method(:dual_lock_key) { |id| "record:#{id}" }
      stub_const("PayloadProbeJob", klass)
      jid = PayloadProbeJob.perform_async(42)
      raw = redis.lrange("queue:default", 0, -1).find { |json| JSON.parse(json)["jid"] == jid }
      expect(raw).not_to include("Proc")
      expect(JSON.parse(raw)["dual_lock"]).to eq("max_wait" => 5)
      expect(Ferrolock::Sidekiq::DualLock::Settings.for(PayloadProbeJob).key_for(JSON.parse(raw)["args"]))
        .to eq("record:42")
    end
  end
end
