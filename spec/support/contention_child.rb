# frozen_string_literal: true

# A child process of spec/cluster_spec.rb: THREADS threads each take a ferrolock primitive on NAMES
# (comma-separated, round robin) over and over, against the Redis Cluster (CLUSTER: URLs,
# comma-separated), and count in the single-node test Redis (REDIS_URL) how many are inside
# each name at once ("inside:<name>", highest in "max:<name>"), how many sections completed
# ("sections") and how many began while another holder was inside ("overlaps"). Runs SECTIONS
# sections per thread, or until the key "stop" exists. Prints one JSON line: sections done here and
# every error by class.
require "ferrolock"
require "json"
require "redis"
require_relative "most_at_once"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

env = ->(key, default = nil) { ENV.fetch(key, default) }
client = Ferrolock::Client.new(cluster: env.call("CLUSTER").split(","))
names = env.call("NAMES").split(",")
kind = env.call("KIND")
hold = Float(env.call("HOLD", "0.002"))
per_thread = Integer(env.call("SECTIONS", "0")) # 0: until "stop"
limit = Integer(env.call("LIMIT", "3"))
# A release cut off by a failover leaves the lock held until its lease runs out.
lease = Float(env.call("LEASE", "5"))

primitives = names.to_h do |name|
  primitive = case kind
              when "mutex" then Ferrolock::DistMutex.new(name, lease: lease, client: client)
              when "limiter" then Ferrolock::ConcurrentLimiter.new(name, limit, wait_timeout: 30, client: client)
              when "dual" then Ferrolock::DualLock.new(name, wait_timeout: 30, client: client)
              end
  [name, primitive]
end

enter = lambda do |probe, name|
  FerrolockTest::MostAtOnce.counted(probe, "inside:#{name}", "max:#{name}") do |inside|
    probe.incr("overlaps") if inside > 1
    probe.incr("sections")
    sleep hold
  end
end

errors = Hash.new(0)
lock = Mutex.new
done = 0
threads = Array.new(Integer(env.call("THREADS", "4"))) do |t|
  Thread.new do
    probe = Redis.new(url: env.call("REDIS_URL"), timeout: 5)
    taken = 0
    loop do
      break if per_thread.positive? ? taken >= per_thread : probe.exists?("stop")

      name = names[(t + taken) % names.size]
      taken += 1
      begin
        case kind
        when "mutex" then primitives[name].synchronize(wait_timeout: 30) { enter.call(probe, name) }
        when "limiter" then primitives[name].within_limit { enter.call(probe, name) }
        when "dual" then primitives[name].run { enter.call(probe, name) }
        end
        lock.synchronize { done += 1 }
      rescue StandardError => e
        lock.synchronize { errors["#{e.class}: #{e.message[0, 120]}"] += 1 }
        sleep 0.05
      end
    end
  end
end
threads.each(&:join)
puts JSON.generate("sections" => done, "errors" => errors)
