# frozen_string_literal: true

require "redis"
require "securerandom"
require_relative "../spec/support/redis_cluster"
require_relative "support/replicated_pair"

# The same uncontended operations on a 3-master Redis Cluster (3 replicas; started here, on
# loopback) and on one node, through ferrolock, beside redis-rb 4.8's own cluster client
# (`Redis.new(cluster: [...])`, one per thread) sending the raw commands an app would. Also on one
# node with a replica, as every master here has one: cluster / that is what the cluster path adds.
# - DistMutex lock+unlock vs SET NX PX + DEL;
# - ConcurrentLimiter within_limit vs one EVAL acquire (purge, count, ZADD) + ZREM;
# - FairTenant.queue_for (1 rule) vs sidekiq-fair_tenant's ZREMRANGEBYSCORE + ZADD + EXPIRE + ZCOUNT.
# The variants take turns, ROUNDS times (the shared VM's speed drifts); each cell is the median of
# its rounds, each ratio the median of the per-round ratios. Names spread over every master.
module ClusterBench
  ROUNDS = 5
  OPS = 2_000
  VARIANTS = ["ferrolock, cluster", "ferrolock, one node", "ferrolock, one node + replica", "redis-rb cluster"].freeze
  NAMES = Array.new(64) { |i| "bench-#{i}" }
  RULES = [{ threshold: 1_000_000, per: 3600, queue: "slow" }].freeze
  SEMAPHORE = <<~LUA
    local t = redis.call('TIME')
    local now = t[1] * 1000 + math.floor(t[2] / 1000)
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
      redis.call('ZADD', KEYS[1], now + 30000, ARGV[1])
      return 1
    end
    return 0
  LUA

  module_function

  # case name => one Hash per round: { "ferrolock, cluster" => ops/s, "ferrolock, one node" => ..., ... }
  def run(cluster_urls, replicated_url)
    clients = { "ferrolock, cluster" => Ferrolock::Client.new(cluster: cluster_urls),
                "ferrolock, one node" => Ferrolock::Client.new(url: Bench.redis_url),
                "ferrolock, one node + replica" => Ferrolock::Client.new(url: replicated_url) }
    raw = -> { Redis.new(cluster: cluster_urls) }
    cases(clients, raw).transform_values do |variants|
      Array.new(ROUNDS) { VARIANTS.to_h { |name| [name, measure(variants.fetch(name))] } }
    end
  end

  def measure(variant)
    setup, operation = variant
    counter = 0
    Bench.ops_per_second(ops: OPS, setup: setup) do |state|
      counter += 1
      operation.call(state, NAMES[counter % NAMES.size], counter)
    end
  end

  # Each case: variant name => [setup, operation]; the ferrolock variants come from `ours`.
  def cases(clients, raw)
    {
      "DistMutex lock+unlock" => ours(clients, :mutex).merge(
        "redis-rb cluster" => [raw, lambda { |redis, name, _|
          redis.set("raw:{#{name}}:lock", "token", nx: true, px: 30_000)
          redis.del("raw:{#{name}}:lock")
        }]
      ),
      "ConcurrentLimiter within_limit (limit 5)" => ours(clients, :limiter).merge(
        "redis-rb cluster" => [raw, lambda { |redis, name, _|
          token = SecureRandom.uuid
          redis.eval(SEMAPHORE, keys: ["raw:{#{name}}:slots"], argv: [token, 5])
          redis.zrem("raw:{#{name}}:slots", token)
        }]
      ),
      "FairTenant enqueue check (1 rule)" => ours(clients, :fair_tenant).merge(
        "redis-rb cluster" => [raw, method(:original_fair_tenant)]
      )
    }
  end

  def ours(clients, operation)
    clients.transform_values { |client| send(operation, client) }
  end

  def mutex(client)
    mutexes = Hash.new { |h, name| h[name] = Ferrolock::DistMutex.new(name, client: client) }
    [-> {}, ->(_, name, _) { mutexes[name].synchronize { nil } }]
  end

  def limiter(client)
    limiters = Hash.new { |h, name| h[name] = Ferrolock::ConcurrentLimiter.new(name, 5, client: client) }
    [-> {}, ->(_, name, _) { limiters[name].within_limit { nil } }]
  end

  def fair_tenant(client)
    rules = Ferrolock::FairTenant::Rules.parse(RULES)
    [-> {}, lambda { |_, name, i|
      Ferrolock::FairTenant.queue_for(rules, job_class: "BenchJob", tenant: name, jid: "j#{i}", queue: "default",
                                             client: client)
    }]
  end

  # What sidekiq-fair_tenant does per enqueue, without MULTI (redis-rb 4.8's cluster client has none).
  def original_fair_tenant(redis, name, index)
    key = "raw:{ft:BenchJob:#{name}}"
    now = Time.now.to_f
    redis.zremrangebyscore(key, "-inf", now - 3600)
    redis.zadd(key, now, "j#{index}")
    redis.expire(key, 3600)
    redis.zcount(key, now - 3600, "+inf")
  end

  def table(results)
    lines = ["| uncontended, 1 thread (median of #{ROUNDS} rounds) | ferrolock, cluster (ops/s) | " \
             "ferrolock, one node (ops/s) | ferrolock, one node + replica (ops/s) | " \
             "redis-rb 4.8 cluster client (ops/s) | cluster / one node | cluster / one node + replica | " \
             "ferrolock / redis-rb (cluster) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    results.each do |name, rounds|
      cells = VARIANTS.map { |variant| Bench.number(Bench.median(rounds.map { |round| round[variant] })) }
      ratios = [1, 2, 3].map { |i| Bench.median(rounds.map { |round| round[VARIANTS[0]] / round[VARIANTS[i]] }) }
      lines << format("| %s | %s | %s | %s | %s | %.2fx | %.2fx | %.2fx |", name, *cells, *ratios)
    end
    lines.join("\n")
  end
end

Bench.define("cluster") do
  cluster = FerrolockTest::RedisCluster.shared
  primary, replica = Bench::ReplicatedPair.start
  ClusterBench.table(ClusterBench.run(cluster.urls, primary.url))
ensure
  replica&.stop
  primary&.stop
end
