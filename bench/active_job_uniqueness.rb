# frozen_string_literal: true

require "active_job"
require "logger"
require "json"
require "openssl"
require "securerandom"
require "redis"

# ActiveJob::Uniqueness (ferrolock's drop-in for activejob-uniqueness): perform_later and perform of a job
# under `unique :until_executed`, against the old gem in the same run. With ACTIVEJOB_UNIQUENESS_LIB set to
# the old gem's lib/ (its redlock and redis-client gems installed), the baseline is the gem itself, in a
# forked child (both define ActiveJob::Uniqueness); without it, the baseline does what the old gem does to
# Redis for a job: its key (MD5 of the serialized arguments), Redlock's lock script (EVALSHA, a random
# value, PX) at enqueue and a DEL after perform, through redis-rb. Adapters are an in-process list, so the
# numbers are the uniqueness cost, not a queue's.
module ActiveJobUniquenessBench
  # Keeps each enqueued payload for the caller to run.
  class ListAdapter
    attr_reader :queue

    def initialize
      @queue = Thread::Queue.new
    end

    def enqueue(job) = @queue << job.serialize
    def enqueue_at(job, _timestamp) = enqueue(job)
  end

  # Redlock's lock script (redlock-rb 2.x): a new lock, or the same value again.
  LOCK = <<~LUA
    if (redis.call("exists", KEYS[1]) == 0 and ARGV[3] == "yes") or redis.call("get", KEYS[1]) == ARGV[1] then
      return redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2])
    end
  LUA

  module_function

  # [perform_later jobs/s, perform jobs/s] for count jobs of klass, each with its own arguments.
  def rates(klass, count)
    adapter = ListAdapter.new
    klass.queue_adapter = adapter
    100.times { |i| klass.perform_later("warm-#{i}") }
    100.times { ActiveJob::Base.execute(adapter.queue.pop) }
    started = Bench.monotonic
    count.times { |i| klass.perform_later("k#{i}") }
    enqueue = count / (Bench.monotonic - started)
    started = Bench.monotonic
    count.times { ActiveJob::Base.execute(adapter.queue.pop) }
    [enqueue, count / (Bench.monotonic - started)]
  end

  # The old gem's Redis work for a job, by hand (see the header).
  def redlock_style_class
    redis = Redis.new(url: Bench.redis_url)
    sha = redis.script(:load, LOCK)
    key = lambda do |job|
      digest = OpenSSL::Digest::MD5.hexdigest(ActiveSupport::JSON.encode(ActiveJob::Arguments.serialize(job.arguments)))
      "activejob_uniqueness:redlock_style_job:#{digest}"
    end
    Class.new(ActiveJob::Base) do
      # (The old gem's events too: it instruments each lock and unlock.)
      before_enqueue do |job|
        throw(:abort) unless redis.evalsha(sha, keys: [key.call(job)], argv: [SecureRandom.uuid, 86_400_000, "yes"])
        ActiveSupport::Notifications.instrument("lock.active_job_uniqueness", resource: key.call(job), job: job)
      end
      after_perform do |job|
        redis.del(key.call(job))
        ActiveSupport::Notifications.instrument("unlock.active_job_uniqueness", resource: key.call(job), job: job)
      end
      def perform(_key) = nil
    end
  end

  # The old gem itself, from its lib/ (ACTIVEJOB_UNIQUENESS_LIB).
  def old_gem_class(lib)
    $LOAD_PATH.unshift(lib)
    require "active_job/uniqueness"
    ActiveJob::Uniqueness.configure { |c| c.redlock_servers = [Bench.redis_url] }
    ActiveJob::Base.include(ActiveJob::Uniqueness::ActiveJobPatch) unless ActiveJob::Base.respond_to?(:unique)
    Class.new(ActiveJob::Base) do
      unique :until_executed
      def perform(_key) = nil
    end
  end

  # The baseline's rates, measured in a forked child (it may load the old gem, which this process must not).
  def baseline(count)
    read, write = IO.pipe
    pid = fork do
      read.close
      lib = ENV.fetch("ACTIVEJOB_UNIQUENESS_LIB", nil)
      klass = lib ? old_gem_class(lib) : redlock_style_class
      Object.const_set(:BaselineUniqueJob, klass)
      write.write(JSON.dump(rates(klass, count)))
      exit!(0)
    end
    write.close
    result = JSON.parse(read.read)
    Process.wait(pid)
    result
  end
end

Bench.define("active_job_uniqueness") do
  ActiveJob::Base.logger = Logger.new(nil, level: Logger::INFO) # (an app's production level: no debug lines)
  Ferrolock.config.logger = Logger.new(nil)
  count = 2_000
  old = ActiveJobUniquenessBench.baseline(count)
  require "active_job/uniqueness"
  ours_class = Class.new(ActiveJob::Base) do
    unique :until_executed
    def perform(_key) = nil
  end
  Object.const_set(:FerrolockUniqueJob, ours_class)
  ours = ActiveJobUniquenessBench.rates(ours_class, count)
  baseline = ENV["ACTIVEJOB_UNIQUENESS_LIB"] ? "activejob-uniqueness 0.4 (Redlock)" : "Redlock-style by hand"
  table = Bench::Table.new("unique :until_executed, 1 thread", ours: "ferrolock", baseline: baseline)
  table.add("perform_later", ours: ours[0], baseline: old[0])
  table.add("perform (ActiveJob::Base.execute)", ours: ours[1], baseline: old[1])
  <<~TEXT
    #{table}

    - ferrolock's perform takes the lock over as a lease renewed while the job runs and releases it
      token-checked (two scripts); the old gem's perform is one DEL
  TEXT
end
