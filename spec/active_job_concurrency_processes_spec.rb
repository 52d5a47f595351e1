# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"
require_relative "fixtures/concurrency_app"

# limits_concurrency's proofs with real Sidekiq processes (spec/fixtures/concurrency_app.rb, ActiveJob on
# Sidekiq's adapter, no ferrolock middleware) and the test redis-server. This process enqueues; the jobs
# record what ran in Redis. (The same behaviour in one process, on :test, :async and :inline:
# spec/active_job_concurrency_spec.rb.)
RSpec.describe "ActiveJob limits_concurrency in Sidekiq processes", time_limit: 120 do
  let(:app) { "spec/fixtures/concurrency_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }

  # No timer of this process outlives the examples (the suite's Redis goes after them).
  after(:all) { Ferrolock::ActiveJob::Slots.reset! }

  around do |example|
    url = FerrolockTest.redis_server.url
    Sidekiq.configure_client { |c| c.redis = { url: url } }
    previous = Ferrolock.config.logger
    Ferrolock.config.logger = Logger.new(nil) # the "blocked" lines of 960 enqueues
    example.run
  ensure
    Ferrolock.config.logger = previous
  end

  # [[key, num, fence, pid], ...] in the order recorded.
  def entries(list)
    redis.lrange(list, 0, -1).map do |line|
      line.split.then do |key, num, fence, pid|
        [key, num.to_i, fence.to_i, pid.to_i]
      end
    end
  end

  def sidekiq(**options) = FerrolockTest::SidekiqProcess.new(app, queues: %w[default], **options)

  # Starts the processes side by side (their boots overlap, so each takes jobs from the first); stops them
  # all after the block.
  def with_processes(*processes)
    processes.map { |process| Thread.new { process.start(boot_timeout: 40) } }.each(&:join)
    yield(*processes)
  ensure
    processes.each(&:stop)
  end

  def logs(processes) = processes.map(&:log).join("\n")

  it "runs 1,000 jobs over 20 keys with to: 2 on two processes: never 3 of a key at once, each once, FIFO per key" do
    keys = Array.new(20) { |i| "k#{i}" }
    # A key's two first jobs are next to each other in the queue, so two threads take them at once: the
    # limit is reached on any machine (interleaved, 20 jobs apart, they did not overlap on a busy one).
    keys.each { |key| 2.times { |num| LcManyJob.perform_later(key, num) } }
    (2...50).each { |num| keys.each { |key| LcManyJob.perform_later(key, num) } }
    # Two of each key went to Sidekiq; the other 960 wait in Redis.
    expect(Sidekiq::Queue.new("default").size).to eq(40)

    processes = [sidekiq(concurrency: 5), sidekiq(concurrency: 5)]
    with_processes(*processes) do
      wait_until(timeout: 90, interval: 0.1, what: "1,000 jobs done") { redis.llen("lc:done") >= 1000 }
    end
    done = entries("lc:done")
    expect(done.map { |key, num, _, _| [key, num] }).to match_array(keys.product((0...50).to_a)), logs(processes)
    maxima = keys.map { |key| Integer(redis.get("lc:max:#{key}")) }
    expect(maxima.max).to eq(2) # never 3 of a key; and 2 did run at once (the limit was reached)
    expect(done.map(&:last).uniq.size).to eq(2) # both processes worked
    # FIFO: blocked jobs were promoted in the order they were blocked, so each key's jobs started (in
    # fencing-token order: the fence is issued as a job starts) in enqueue order, give or take the jobs
    # that held a slot at once (to: 2) reaching their workers in another order.
    started = entries("lc:started")
    keys.each do |key|
      order = started.select { |k, _, _, _| k == key }.sort_by { |_, _, fence, _| fence }.map { |_, num, _, _| num }
      displaced = order.each_with_index.map { |num, rank| (num - rank).abs }.max
      expect(displaced).to be <= 2, "#{key} started in order #{order}"
    end
    # Idle afterwards: nothing held or blocked; the keys left expire. (The index of keys with blocked jobs
    # may keep an entry whose write crossed another process's: the timer's visit when it is due drops it.)
    expect(redis.keys("ferrolock:{concurrency:*}:slots") + redis.keys("ferrolock:{concurrency:*}:blocked")).to be_empty
    redis.keys("ferrolock:*").each { |key| expect(redis.pttl(key)).to be_positive, key }
  end

  it "solid_queue #761: a holder paused past its lease learns it lost its slot, and its late release frees nothing" do
    # One thread each: no idle fetch of the paused process can take the promoted job.
    env = { "LC_DURATION" => "3" }
    processes = [sidekiq(concurrency: 1, env: env), sidekiq(concurrency: 1, env: env)]
    with_processes(*processes) do |*|
      LcStallJob.perform_later(0, 1.5) # the job whose process is paused mid-run
      wait_until(timeout: 20, interval: 0.02, what: "the first job running") { redis.llen("lc:started") == 1 }
      _, _, paused_fence, paused_pid = entries("lc:started").first
      paused = processes.find { |process| process.pid == paused_pid }
      Process.kill("STOP", -paused.pid)
      begin
        LcStallJob.perform_later(1, 4) # blocked behind it; holds the slot while the paused job thaws
        LcStallJob.perform_later(2, 0.1)
        # The paused holder stops renewing: after its 3 s lease the next job is promoted, and runs in the
        # other process.
        wait_until(timeout: 15, interval: 0.02, what: "the second job running") { redis.llen("lc:started") == 2 }
        elsewhere = satisfy { |pid| pid != paused_pid }
        expect(entries("lc:started").last).to match([anything, 1, be > paused_fence, elsewhere])
      ensure
        Process.kill("CONT", -paused.pid)
      end
      # Thawed, it finishes its body (no lease can stop a frozen process), learning first that its slot is
      # gone; its release frees nothing: job 2 still waits for job 1's real release.
      wait_until(timeout: 10, interval: 0.02, what: "the paused job done") do
        entries("lc:done").any? { |e| e[1].zero? }
      end
      expect(entries("lc:lost").map { |e| e[1] }).to eq([0])
      expect(entries("lc:started").map { |e| e[1] }).to eq([0, 1])
      expect(redis.llen("ferrolock:{concurrency:LcStallJob/stall}:blocked")).to eq(1)
      wait_until(timeout: 15, interval: 0.05, what: "every job done") { redis.llen("lc:done") == 3 }
    end
    # Two performed at once only while the paused job finished its body: to: 1 plus the one paused holder.
    expect(Integer(redis.get("lc:max:stall"))).to be <= 2
    fences = entries("lc:started").map { |e| e[2] }
    expect(fences).to eq(fences.sort.uniq)
    expect(logs(processes)).to include("was lost before the job ended")
  end

  it "forced shutdown (TERM past Sidekiq's timeout): the job cut short gives its slot back, runs again within to:" do
    stopping = sidekiq(concurrency: 1, shutdown_timeout: 1)
    with_processes(stopping) do
      LcShutdownJob.perform_later(0, 30)
      wait_until(timeout: 20, interval: 0.02, what: "the first job running") { redis.llen("lc:started") == 1 }
      2.times { |num| LcShutdownJob.perform_later(num + 1, 0) }
    end
    # Sidekiq requeued the running job and raised into it: its release promoted the next one meanwhile.
    expect(stopping.log).to include("Pushed 1 jobs back to Redis").or include("Pushed 1 jobs back")
    with_processes(sidekiq(concurrency: 3)) do
      wait_until(timeout: 20, interval: 0.05, what: "every job done") { redis.llen("lc:done") == 3 }
    end
    expect(entries("lc:done").map { |e| e[1] }).to contain_exactly(0, 1, 2)
    expect(Integer(redis.get("lc:max:shutdown"))).to eq(1)
    expect(redis.llen("ferrolock:{concurrency:LcShutdownJob/shutdown}:blocked")).to eq(0)
  end

  it "kill -9 of a whole process: its blocked jobs are not lost and run once the holder's lease runs out" do
    env = { "LC_DURATION" => "2" }
    victim = sidekiq(concurrency: 2, env: env)
    survivor = sidekiq(concurrency: 2, env: env)
    with_processes(victim) do
      LcStallJob.perform_later(0, 30) # held by the process killed below
      wait_until(timeout: 20, interval: 0.02, what: "the first job running") { redis.llen("lc:started") == 1 }
      3.times { |num| LcStallJob.perform_later(num + 1, 0.05) }
      Process.kill("KILL", -victim.pid)
    end
    killed_at = Ferrolock.monotonic
    redis.del("lc:now:stall", "lc:max:stall") # the killed job never counted itself out
    with_processes(survivor) do
      wait_until(timeout: 20, interval: 0.05, what: "the blocked jobs done") { redis.llen("lc:done") == 3 }
    end
    # The lease (2 s), the survivor's boot and the timer's 0.2 s: not a sweep period, not `duration` again.
    expect(Ferrolock.monotonic - killed_at).to be < 15
    expect(entries("lc:done").map { |e| e[1] }).to eq([1, 2, 3])
    expect(Integer(redis.get("lc:max:stall"))).to eq(1)
  end
end
