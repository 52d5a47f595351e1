# frozen_string_literal: true

# The Sidekiq Enterprise incident, replayed with threads standing in for Sidekiq's: a limit of 3
# whose slots last far less than the jobs (Sidekiq Enterprise's lock_timeout, ferrolock's lease).
# Without renewal, slots "expire" under running jobs and every thread ends up inside; with
# ferrolock's renewed leases the limit holds.
module LimiterDemo
  JOB_SECONDS = 1.2
  LEASE = 0.4

  module_function

  # Runs `jobs` jobs on 5 threads, each job's block inside `enter`; returns the most blocks seen
  # inside at once.
  def run_jobs(jobs, &enter)
    queue = Queue.new
    jobs.times { |i| queue << i }
    inside = 0
    most = 0
    lock = Mutex.new
    Array.new(5) do
      Thread.new do
        while (queue.pop(true) rescue nil) # rubocop:disable Style/RescueModifier
          enter.call do
            lock.synchronize { most = [most, inside += 1].max }
            sleep JOB_SECONDS
            lock.synchronize { inside -= 1 }
          end
        end
      end
    end.each(&:join)
    most
  end

  # What the incident's limiter did: a slot is a sorted-set member that simply expires after
  # LEASE (its lock_timeout), renewed by nobody.
  def unrenewed(client, key)
    token = Random.new_seed.to_s
    sleep 0.01 until client.call("EVAL", <<~LUA, 1, key, token, 3, (LEASE * 1000).to_i) == 1
      local t = redis.call('TIME')
      local now = t[1] * 1000 + math.floor(t[2] / 1000)
      redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
      if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
      redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
      return 1
    LUA
    yield
  ensure
    client.call("ZREM", key, token)
  end
end

Demo.scenario("ConcurrentLimiter: jobs outlive their lease, the limit holds") do |report|
  client = Demo.client(namespace: "demo-limiter-#{Process.pid}")
  report.line("setup", "limit 3, lease #{LimiterDemo::LEASE} s, 5 threads, " \
                       "jobs of #{LimiterDemo::JOB_SECONDS} s")

  naive_key = client.key("naive", "slots")
  naive = LimiterDemo.run_jobs(5) { |&job| LimiterDemo.unrenewed(client, naive_key, &job) }
  report.line("slots that expire under running jobs", "up to #{naive} jobs inside at once (the incident)")

  erp = Ferrolock::ConcurrentLimiter.new("erp", 3, wait_timeout: 10, lease: LimiterDemo::LEASE,
                                                   client: client)
  samples = []
  sampler = Thread.new { loop { (samples << erp.status) && sleep(0.02) } }
  started = Demo.monotonic
  most = LimiterDemo.run_jobs(8) { |&job| erp.within_limit(&job) }
  took = Demo.monotonic - started
  sampler.kill.join
  report.check("ferrolock: never more than 3 inside", most == 3, "at most #{most} inside, 8 jobs in #{took.round(2)} s")
  report.line("status samples: max in_use / waiting",
              "#{samples.map { |s| s[:in_use] }.max} / #{samples.map { |s| s[:waiting] }.max}")

  holders = Array.new(3) { Thread.new { erp.within_limit { sleep 1 } } }
  sleep 0.05 until erp.status[:in_use] == 3
  begin
    erp.within_limit(wait_timeout: 0.2) { nil }
    report.check("OverLimit when full", false)
  rescue Ferrolock::OverLimit => e
    report.check("OverLimit when full (a middleware reschedules the job)", e.limiter.equal?(erp), e.message)
  end
  holders.each(&:join)

  # A process killed while holding all 3 slots: they free within a lease.
  reader, writer = IO.pipe
  pid = fork do
    reader.close
    slot_held = lambda do
      writer.puts("in")
      sleep 60
    end
    Array.new(3) { Thread.new { erp.within_limit(&slot_held) } }.each(&:join)
  end
  writer.close
  3.times { reader.gets }
  sleep LimiterDemo::LEASE * 2 # renewed meanwhile: still held
  report.check("a live process keeps its slots past the lease (renewed)", erp.status[:in_use] == 3)
  Process.kill("KILL", pid)
  Process.wait(pid)
  recovered = Demo.monotonic
  Array.new(3) { Thread.new { erp.within_limit { nil } } }.each(&:join)
  waited = Demo.monotonic - recovered
  report.check("kill -9'ed process's 3 slots free within the lease + 1 s", waited < LimiterDemo::LEASE + 1,
               report.ms(waited))
end
