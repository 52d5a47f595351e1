# frozen_string_literal: true

require "json"
require "redis"
require "sidekiq"
require "timeout"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

# A big tenant's burst, then small tenants: how long the small tenants wait with and without
# FairTenant. Jobs are pushed with Sidekiq::Client; 5 worker threads fetch them the way Sidekiq's
# weighted BasicFetch does (BRPOP over the queues shuffled by weight each time).
module DemoFairTenant
  QUEUES = { "default" => 6, "default_throttled" => 3, "default_superslow" => 1 }.freeze
  BIG = 2000
  SMALL = 5
  SMALL_JOBS = 10
  JOB_SECONDS = 0.01

  # The job class whose rules the middleware reads (it never runs here: the workers below sleep).
  class Job
    include Sidekiq::Worker
    sidekiq_options queue: "default", fair_tenant_queues: [
      { threshold: 100, per: 3600, queue: "default_throttled" },
      { threshold: 500, per: 3600, queue: "default_superslow" }
    ]

    def self.fair_tenant(tenant, _enqueued_at) = tenant
  end

  module_function

  # Runs the burst once (see collect for what it returns).
  def run(with_middleware)
    redis = Redis.new(url: Demo.redis_url)
    redis.flushdb
    client = Sidekiq::Client.new(ConnectionPool.new(size: 2) { Redis.new(url: Demo.redis_url) })
    client.middleware { |chain| chain.add Ferrolock::Sidekiq::FairTenantMiddleware } if with_middleware
    done = Queue.new
    workers = Array.new(5) { Thread.new { work(done) } }
    small_pushed_at = push_burst(client)
    Timeout.timeout(120) { collect(done, BIG + (SMALL * SMALL_JOBS)).merge(small_pushed_at: small_pushed_at) }
  ensure
    workers&.each(&:kill)&.each(&:join)
  end

  # When the small tenants' first job was pushed.
  def push_burst(client)
    BIG.times { client.push("class" => Job, "args" => ["big", Time.now.to_f]) }
    small_pushed_at = Time.now.to_f
    SMALL.times { |t| SMALL_JOBS.times { client.push("class" => Job, "args" => ["small-#{t}", Time.now.to_f]) } }
    small_pushed_at
  end

  def work(done)
    redis = Redis.new(url: Demo.redis_url)
    weighted = QUEUES.flat_map { |queue, weight| ["queue:#{queue}"] * weight }
    loop do
      queue, json = redis.brpop(*weighted.shuffle.uniq, timeout: 1)
      next unless json

      job = JSON.parse(json)
      tenant, enqueued_at = job["args"]
      sleep JOB_SECONDS
      finished_at = Time.now.to_f
      done << [tenant, finished_at - enqueued_at, queue.delete_prefix("queue:"), job["jid"], finished_at]
    end
  ensure
    # A killed worker's BRPOP stays blocked in Redis until its connection closes, and would
    # swallow a job of the next run.
    redis&.close
  end

  # { "small" => [latencies], "big" => [latencies], :queues => big tenant's jobs per queue, :jids => [...],
  #   :finished => [[who, finished_at]] in the order the jobs finished }
  def collect(done, count)
    runs = { "small" => [], "big" => [], queues: Hash.new(0), jids: [], finished: [] }
    count.times do
      tenant, seconds, queue, jid, finished_at = done.pop
      who = tenant.start_with?("small") ? "small" : "big"
      runs[who] << seconds
      runs[:queues][queue] += 1 if who == "big"
      runs[:jids] << jid
      runs[:finished] << [who, finished_at]
    end
    runs
  end

  # How many of the big tenant's jobs ran between the small tenants' first push and their 95th-percentile
  # job's finish: the jobs they waited behind. It counts order, not time, so a loaded machine (slower
  # pushes, slower sleeps) moves it far less than the p95 in seconds.
  def big_jobs_ahead(run)
    finished = run[:finished].sort_by(&:last).select { |_, at| at >= run[:small_pushed_at] }
    p95_small = (SMALL * SMALL_JOBS * 0.95).ceil
    counts = Hash.new(0)
    finished.each do |who, _|
      counts[who] += 1
      break if counts["small"] >= p95_small
    end
    counts["big"]
  end

  def p95(values)
    values.sort[(values.size * 0.95).ceil - 1]
  end
end

Demo.scenario("FairTenant: a big tenant's burst no longer delays small tenants") do |report|
  Ferrolock.configure { |c| c.redis_url = Demo.redis_url }
  report.line("burst", "#{DemoFairTenant::BIG} jobs of one tenant, then #{DemoFairTenant::SMALL} small tenants x " \
                       "#{DemoFairTenant::SMALL_JOBS}; jobs of 10 ms")
  report.line("workers", "5 threads, weighted queues default 6 / throttled 3 / superslow 1")
  report.line("rules", ">100/h -> default_throttled, >500/h -> default_superslow")
  plain = DemoFairTenant.run(false)
  fair = DemoFairTenant.run(true)
  report.line("big tenant's jobs ran from", fair[:queues].sort.map { |q, n| "#{q} #{n}" }.join(", "))
  report.line("")
  report.line(format("%-26s %14s %16s", "p95 enqueue-to-finish", "without", "with FairTenant"))
  %w[small big].each do |who|
    report.line(format("%-26s %14s %16s", "#{who} tenant#{"s" if who == "small"}",
                       report.ms(DemoFairTenant.p95(plain[who])), report.ms(DemoFairTenant.p95(fair[who]))))
  end
  ahead = [plain, fair].map { |run| DemoFairTenant.big_jobs_ahead(run) }
  report.line(format("%-26s %14d %16d", "big jobs run ahead of them", *ahead))
  ratio = ahead[0].fdiv([ahead[1], 1].max)
  report.check("small tenants wait behind at least 5x fewer of the big tenant's jobs", ratio >= 5,
               format("%d against %d, %.1fx", ahead[1], ahead[0], ratio))
  total = DemoFairTenant::BIG + (DemoFairTenant::SMALL * DemoFairTenant::SMALL_JOBS)
  report.check("every job ran once", [plain, fair].all? { |run| run[:jids].uniq.size == total })
ensure
  Ferrolock.reset_config!
  Ferrolock.configure { |c| c.redis_url = Demo.redis_url }
end
