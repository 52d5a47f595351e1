# frozen_string_literal: true

require "redis"
require "sidekiq"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

# FairTenant: enqueues/s through Sidekiq::Client with no middleware, with ferrolock's middleware
# (1 and 5 rules) and with a middleware doing what sidekiq-fair_tenant does (a MULTI of
# ZREMRANGEBYSCORE + ZADD + EXPIRE at client time, then one ZCOUNT per rule); Redis commands per
# enqueue from INFO commandstats; Redis memory per tenant after 100,000 enqueues in each mode.
module FairTenantBench
  RULES = [
    { queue: "throttled_1", threshold: 5_000, per: 86_400 },
    { queue: "throttled_2", threshold: 2_000, per: 3_600 },
    { queue: "throttled_3", threshold: 1_000, per: 600 },
    { queue: "throttled_4", threshold: 500, per: 60 },
    { queue: "throttled_5", threshold: 200, per: 10 }
  ].freeze
  TENANTS = 100

  # The original's algorithm, as a baseline: 1 + N round trips, the client's clock.
  class OriginalStyle
    WINDOW = 86_400

    def call(_worker, job, queue, pool)
      rules = job["fair_tenant_queues"]
      return yield if rules.nil? || job["fair_tenant"].nil?

      pool.with { |redis| job["queue"] = choose(redis, job, rules, queue) }
      yield
    end

    private

    def choose(redis, job, rules, queue)
      key = "original:#{job["class"]}:#{job["fair_tenant"]}"
      now = Time.now.to_i
      redis.multi do |tx|
        tx.zremrangebyscore(key, "-inf", now - WINDOW)
        tx.zadd(key, now, "jid:#{job["jid"]}")
        tx.expire(key, WINDOW)
      end
      broken = rules.select { |rule| rule[:threshold] < redis.zcount(key, now - rule[:per], now) }
      broken.empty? ? queue : broken.last[:queue]
    end
  end

  module_function

  def job_class(rules)
    Class.new do
      include Sidekiq::Worker
      sidekiq_options queue: "default", fair_tenant_queues: rules
    end
  end

  def client(middleware)
    client = Sidekiq::Client.new
    client.middleware { |chain| chain.add(middleware) } if middleware
    client
  end

  def enqueue(client, klass, index)
    client.push("class" => klass, "args" => [index], "fair_tenant" => "t#{index % TENANTS}")
  end

  Case = Struct.new(:name, :client, :klass, :mode, :reply_spin)

  # One row each; ferrolock rows also run with reply_spin 0 (every reply awaited asleep, as
  # redis-rb does) to show what polling for replies contributes.
  def cases
    list = [Case.new("plain Sidekiq::Client.push", client(nil), job_class(nil))]
    ours = client(Ferrolock::FairTenant::ClientMiddleware)
    [1, 5].each do |count|
      klass = job_class(RULES.first(count))
      Object.const_set("FairTenantBench#{count}Job", klass)
      rules = "#{count} rule#{"s" if count > 1}"
      %i[exact bounded].each do |mode|
        list << Case.new("ferrolock #{mode}, #{rules}", ours, klass, mode, Ferrolock::Configuration::DEFAULT_REPLY_SPIN)
        list << Case.new("ferrolock #{mode}, #{rules}, reply_spin 0", ours, klass, mode, 0)
      end
      list << Case.new("original-style, #{rules}", client(OriginalStyle), klass)
    end
    list
  end

  def configure(bench_case)
    return unless bench_case.mode

    Ferrolock.configure do |c|
      c.fair_tenant_mode = bench_case.mode
      c.reply_spin = bench_case.reply_spin
    end
  end

  # Enqueues/s and CPU µs per enqueue of this process (Rust threads included) for `ops` enqueues.
  def measure(bench_case, ops)
    counter = 0
    (ops / 10).times { enqueue(bench_case.client, bench_case.klass, counter += 1) }
    wall = Bench.monotonic
    cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    ops.times { enqueue(bench_case.client, bench_case.klass, counter += 1) }
    cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu
    [ops / (Bench.monotonic - wall), cpu / ops * 1e6]
  end

  # Commands per enqueue as "12.0 (zcount 5, evalsha 1, …)".
  def commands(redis, client, klass)
    redis.flushdb
    redis.config(:resetstat)
    500.times { |i| enqueue(client, klass, i) }
    commands_per_enqueue(redis, 500)
  end

  def commands_per_enqueue(redis, enqueues)
    stats = redis.info("commandstats").reject { |name, _| name.start_with?("config", "info", "flushdb") }
    calls = stats.transform_values { |s| s["calls"].to_f / enqueues }
    total = calls.values.sum
    detail = calls.sort_by { |_, n| -n }.map { |name, n| format("%s %g", name, n.round(2)) }.join(", ")
    format("%.1f (%s)", total, detail)
  end

  # MEMORY USAGE of one tenant's key after `count` enqueues within the window.
  def memory_after(redis, count, mode)
    redis.flushdb
    key = Ferrolock::FairTenant.key("MemoryJob", "big", mode: mode)
    rules = Ferrolock::FairTenant::Rules.parse(RULES)
    threads = Array.new(4) do |t|
      Thread.new do
        (count / 4).times do |i|
          Ferrolock::FairTenant.queue_for(rules, job_class: "MemoryJob", tenant: "big", jid: "#{t}-#{i}-#{"x" * 18}",
                                                 queue: "default", mode: mode)
        end
      end
    end
    threads.each(&:join)
    redis.call("MEMORY", "USAGE", key, "SAMPLES", "0")
  end

  def original_memory_after(redis, count)
    redis.flushdb
    now = Time.now.to_i
    count.times.each_slice(1000) do |slice|
      redis.pipelined { |p| slice.each { |i| p.zadd("original:MemoryJob:big", now, "jid:#{format("%024x", i)}") } }
    end
    redis.call("MEMORY", "USAGE", "original:MemoryJob:big", "SAMPLES", "0")
  end

  # Sidekiq's push is one round trip; ours adds one script; the original adds its MULTI and one
  # ZCOUNT per rule.
  def round_trips(name)
    rules = name[/(\d+) rule/, 1].to_i
    return 1 if rules.zero?

    name.start_with?("ferrolock") ? 2 : 2 + rules
  end

  def bytes(value)
    value >= 1024 * 1024 ? format("%.1f MiB", value / 1024.0 / 1024) : "#{value} B"
  end
end

Bench.define("fair_tenant") do
  Sidekiq.configure_client { |c| c.redis = { url: Bench.redis_url, size: 2 } }
  Ferrolock.configure { |c| c.redis_url = Bench.redis_url }
  redis = Redis.new(url: Bench.redis_url)
  cases = FairTenantBench.cases
  # Each round runs every case once, in order, and each ratio is taken against the plain push of
  # the same round; the table shows medians over the rounds, so a burst of load on a shared
  # machine moves one round, not the result.
  rounds = Integer(ENV.fetch("FAIR_TENANT_ROUNDS", "7"))
  results = Hash.new { |h, k| h[k] = { rate: [], cpu: [], ratio: [] } }
  rounds.times do
    plain = nil
    cases.each do |bench_case|
      FairTenantBench.configure(bench_case)
      redis.flushdb
      rate, cpu = FairTenantBench.measure(bench_case, 2_000)
      plain ||= rate
      results[bench_case.name][:rate] << rate
      results[bench_case.name][:cpu] << cpu
      results[bench_case.name][:ratio] << (rate / plain)
    end
  end

  table = ["| enqueue path | enqueues/s | vs plain push: median of #{rounds} rounds (range) | CPU µs per enqueue | " \
           "round trips | Redis commands per enqueue (commandstats) |",
           "|---|---:|---:|---:|---:|---|"]
  cases.each do |bench_case|
    FairTenantBench.configure(bench_case)
    result = results[bench_case.name]
    table << format("| %s | %s | %.2fx (%.2f–%.2f) | %.0f | %d | %s |", bench_case.name,
                    Bench.number(Bench.median(result[:rate])),
                    Bench.median(result[:ratio]), result[:ratio].min, result[:ratio].max,
                    Bench.median(result[:cpu]), FairTenantBench.round_trips(bench_case.name),
                    FairTenantBench.commands(redis, bench_case.client, bench_case.klass))
  end

  count = 100_000
  table << "" << "| storage after #{Bench.number(count)} enqueues of one tenant " \
                 "(5 rules, longest 1 day) | Redis memory per tenant |" << "|---|---:|"
  table << "| ferrolock :exact (sorted set of jids) | " \
           "#{FairTenantBench.bytes(FairTenantBench.memory_after(redis, count, :exact))} |"
  table << "| ferrolock :bounded (sliding-window counters) | " \
           "#{FairTenantBench.bytes(FairTenantBench.memory_after(redis, count, :bounded))} |"
  table << "| original-style (sorted set of \"jid:…\") | " \
           "#{FairTenantBench.bytes(FairTenantBench.original_memory_after(redis, count))} |"
  Ferrolock.reset_config!
  table.join("\n")
end
