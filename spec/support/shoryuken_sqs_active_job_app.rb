# frozen_string_literal: true

# The app of a REAL Shoryuken 7.0.3 (or 6.2.1) process running ActiveJob through Shoryuken's own adapter
# (`shoryuken -r spec/support/shoryuken_sqs_active_job_app.rb -q QUEUE…`), with Rails 8.1's ActiveJob
# (vendored; spec/support/shoryuken_sqs.rb puts it and the Shoryuken of its Run on RUBYLIB). It loads
# spec/support/shoryuken_sqs_app.rb first (the README's set-up verbatim, the record in Redis), then defines
# a continuable job. Run by plain `ruby` with FERROLOCK_SQS_ENQUEUE set, it is the producer instead: it
# enqueues and exits.
#
# Queues whose name starts with "ajkey-" lock on the ActiveJob job_id (an idempotency key: a producer
# that enqueues the same job twice runs it once); the others on the SQS message id (the default).
require "shoryuken"
require_relative "shoryuken_sqs_app"
require "active_job"
# Shoryuken loads its adapter only when ActiveJob was loaded before it (Rails apps' order); here, after.
# Rails has no Shoryuken adapter of its own (neither 6.1, 7.2 nor 8.1): `:shoryuken` is Shoryuken's,
# ActiveJob::QueueAdapters::ShoryukenAdapter from its extensions in 6.x (its wrapper nested in it), from
# active_job/queue_adapters in 7.x (its wrapper Shoryuken::ActiveJob::JobWrapper).
if Shoryuken::VERSION.start_with?("6.")
  require "shoryuken/extensions/active_job_extensions"
  require "shoryuken/extensions/active_job_adapter"
  wrapper = ActiveJob::QueueAdapters::ShoryukenAdapter::JobWrapper
else
  require "active_job/extensions"
  require "active_job/queue_adapters/shoryuken_adapter"
  wrapper = Shoryuken::ActiveJob::JobWrapper
end

ActiveJob::Base.queue_adapter = :shoryuken
ActiveJob::Base.logger = Logger.new($stdout, level: :warn)

# FERROLOCK_SQS_AJ_LEASE: the lock's lease (seconds; ferrolock's default otherwise), for a process killed mid-job.
lock = { idempotency_key: ->(sqs_msg, body) { body["job_id"] if sqs_msg.queue_name.start_with?("ajkey-") } }
lock[:lease] = Float(ENV["FERROLOCK_SQS_AJ_LEASE"]) if ENV["FERROLOCK_SQS_AJ_LEASE"]
wrapper.shoryuken_options(ferrolock_lock: lock)
ENV.fetch("FERROLOCK_SQS_QUEUES", "").split(",").each do |queue|
  Shoryuken.register_worker(queue, wrapper)
end

# Which job class each lock saw (the record: ferrolock names the job, not Shoryuken's wrapper).
Ferrolock.subscribe do |event, payload|
  ShoryukenSqsApp.redis.rpush("rec:aj:locked_as", payload[:job_class]) if event == :locked
rescue StandardError
  nil
end

# Which Shoryuken each process (workers and producer) loaded.
ShoryukenSqsApp.redis.sadd("rec:aj:shoryuken", Shoryuken::VERSION)
Shoryuken.configure_server do |config|
  config.on(:startup) do
    # limits_concurrency's timer from the server's start, as an app without Rails sets it up (doc/ACTIVE_JOB.md).
    Ferrolock::ActiveJob::ExpiryTimer.start
    ShoryukenSqsApp.redis.rpush("rec:aj:booted", Process.pid)
  end
end

# `steps` steps of `pause` seconds, each recorded once done; a checkpoint after each, where Rails 8.1
# interrupts the job when Shoryuken stops (ShoryukenAdapter#stopping?) and enqueues it again to resume.
class StepsJob < ActiveJob::Base
  include ActiveJob::Continuable

  # Resume at once (the default waits 5 s).
  self.resume_options = { wait: 0 }

  def perform(name, steps, pause)
    redis = ShoryukenSqsApp.redis
    me = "#{Process.pid}:#{Thread.current.object_id}"
    running = "rec:running:#{name}"
    others = redis.smembers(running).select { |who| ShoryukenSqsApp.alive?(Integer(who.split(":").first)) }
    redis.rpush("rec:overlaps", name) unless others.empty?
    redis.sadd(running, me)
    redis.rpush("rec:aj:performs", JSON.generate([name, resumptions, Process.pid]))
    begin
      step :work, start: 0 do |work|
        (work.cursor...steps).each do |i|
          sleep pause
          redis.rpush("rec:aj:steps", JSON.generate([name, i, Process.pid]))
          work.advance!
        end
      end
    ensure
      redis.srem(running, me)
    end
  end
end

# Fails its first attempt; ActiveJob's retry_on enqueues it again at once (same job_id, a new message).
class RetryOnceJob < ActiveJob::Base
  retry_on RuntimeError, wait: 0, attempts: 3

  def perform(name)
    redis = ShoryukenSqsApp.redis
    attempt = redis.incr("rec:aj:attempt:#{name}")
    redis.rpush("rec:aj:attempts", JSON.generate([name, attempt, Process.pid]))
    raise "#{name} fails on its first attempt" if attempt == 1
  end
end

# limits_concurrency through Shoryuken's adapter (no Rails here: included by hand, as without the
# Railtie). How many of its key perform at once is counted in Redis by the job itself.
class LimitedJob < ActiveJob::Base
  include Ferrolock::ActiveJob::Concurrency

  limits_concurrency to: 2, key: ->(key, _num, _pause) { key }, duration: 30

  def perform(key, num, pause)
    redis = ShoryukenSqsApp.redis
    redis.rpush("rec:lc:at_once", redis.incr("rec:lc:now:#{key}"))
    begin
      sleep pause
      redis.rpush("rec:lc:ran", num)
    ensure
      redis.decr("rec:lc:now:#{key}")
    end
  end
end

# One at a time, a 2 s lease: a promoted copy that has not started within it is promoted again by the
# expiry timer, and at perform only the copy that starts first runs (the others are duplicates). Records
# each run.
class RepromotedJob < ActiveJob::Base
  include Ferrolock::ActiveJob::Concurrency

  limits_concurrency to: 1, key: "repromoted", duration: 2

  def perform(num)
    ShoryukenSqsApp.redis.rpush("rec:rp:ran", num)
  end
end

# limits_concurrency (to: 2 in the code) whose limit an operator changes live
# (spec/shoryuken_sqs_pause_spec.rb): the most of a key at once is kept in "rec:ll:max:<key>", and each
# run records "<key> <num> <pid>" as it starts ("rec:ll:started") and ends ("rec:ll:done").
require_relative "most_at_once"
class LiveLimitJob < ActiveJob::Base
  include Ferrolock::ActiveJob::Concurrency

  limits_concurrency to: 2, key: ->(key, _num) { key }, duration: 30

  def perform(key, num)
    redis = ShoryukenSqsApp.redis
    FerrolockTest::MostAtOnce.counted(redis, "rec:ll:now:#{key}", "rec:ll:max:#{key}") do
      redis.rpush("rec:ll:started", "#{key} #{num} #{Process.pid}")
      sleep 0.3
      redis.rpush("rec:ll:done", "#{key} #{num} #{Process.pid}")
    end
  end
end

# ActiveJob::Uniqueness (the activejob-uniqueness drop-in) through Shoryuken's adapter: one queued or
# running per key (its first argument); a retry_on retry keeps the lock. Counts itself as LimitedJob does.
require "active_job/uniqueness"
class UniqueSqsJob < ActiveJob::Base
  unique :until_executed, on_conflict: :log
  retry_on RuntimeError, wait: 0, attempts: 3

  def lock_key_arguments = arguments.first(1)

  def perform(key, num, pause)
    redis = ShoryukenSqsApp.redis
    redis.rpush("rec:uq:at_once", redis.incr("rec:uq:now:#{key}"))
    begin
      sleep pause
      raise "#{key} #{num} fails its first attempt" if redis.incr("rec:uq:attempt:#{key}:#{num}") == 1 && num.zero?

      redis.rpush("rec:uq:ran", num)
    ensure
      redis.decr("rec:uq:now:#{key}")
    end
  end
end

# Counts its runs in Redis.
class CountedJob < ActiveJob::Base
  def perform(name)
    ShoryukenSqsApp.redis.rpush("rec:aj:counted:#{name}", Process.pid)
  end
end

# One at a time with a 3 s lease. Job 0's first run sleeps until its process is killed (kill -9); any
# other run takes 0.2 s. Each run records "<num> <pid>" as it starts and how many of the key run then.
class LimitedKillJob < ActiveJob::Base
  include Ferrolock::ActiveJob::Concurrency

  limits_concurrency to: 1, key: "kill", duration: 3

  def perform(num)
    redis = ShoryukenSqsApp.redis
    first = redis.incr("rec:lk:runs:#{num}") == 1
    redis.rpush("rec:lk:started", "#{num} #{Process.pid}")
    redis.rpush("rec:lk:at_once", redis.incr("rec:lk:now"))
    begin
      sleep(num.zero? && first ? 60 : 0.2)
      redis.rpush("rec:lk:ran", num)
    ensure
      redis.decr("rec:lk:now")
    end
  end
end

# activejob-uniqueness' five strategies (ferrolock's drop-in, where this ferrolock has it), keyed by the
# first argument; a conflict is logged and the job dropped. And the dual_lock macro: per key one runs,
# one waits, the rest are skipped. Each run records "<class> <num>" as it starts and how many of its
# class run then.
begin
  require "active_job/uniqueness"
rescue LoadError
  nil
end
module UniqueRecord
  def unique_run(num, hold)
    redis = ShoryukenSqsApp.redis
    name = self.class.name
    redis.rpush("rec:uq:started", "#{name} #{num}")
    redis.rpush("rec:uq:at_once:#{name}", redis.incr("rec:uq:now:#{name}"))
    sleep hold
  ensure
    redis.decr("rec:uq:now:#{name}")
  end
end
if ActiveJob::Base.respond_to?(:unique)
  %w[until_executing until_executed until_expired until_and_while_executing while_executing].each do |strategy|
    Object.const_set("Sh#{strategy.split("_").map(&:capitalize).join}Job", Class.new(ActiveJob::Base) do
      include UniqueRecord
      unique strategy.to_sym, on_conflict: :log, on_runtime_conflict: :log, lock_ttl: 60

      def lock_key_arguments = arguments.first(1)
      def perform(_key, num, hold) = unique_run(num, hold)
    end)
  end
end
if defined?(Ferrolock::ActiveJob::DualLock)
  class ShDualLockJob < ActiveJob::Base
    include Ferrolock::ActiveJob::DualLock
    include UniqueRecord

    dual_lock wait_timeout: 20
    def self.dual_lock_key(key, *) = "shdual:#{key}"
    def perform(_key, num, hold) = unique_run(num, hold)
  end
end

# The producer: FERROLOCK_SQS_ENQUEUE is [[queue, job class, arguments, times, how]…]; a job enqueued
# `times` times is one job (one job_id) sent again, as a producer retrying its send does: the same
# object (Shoryuken 7's adapter keeps the first send's parameters in it, so the same body goes again),
# or with `how` "copy" a copy made from its serialized form (an outbox's retry: a body of its own,
# enqueued_at included). With FERROLOCK_SQS_FIFO_DEDUP_IDS=off, Shoryuken 7's adapter makes no FIFO
# dedup id of the job's arguments.
Shoryuken.active_job_fifo_message_deduplication = false if ENV["FERROLOCK_SQS_FIFO_DEDUP_IDS"] == "off"
if ENV["FERROLOCK_SQS_ENQUEUE"]
  JSON.parse(ENV.fetch("FERROLOCK_SQS_ENQUEUE")).each do |queue, job_class, arguments, times, how|
    job = Object.const_get(job_class).new(*arguments)
    times.times do |n|
      send = how == "copy" && n.positive? ? ActiveJob::Base.deserialize(job.serialize) : job
      sent = send.enqueue(queue: queue)
      # (A unique job's duplicate is refused: recorded, not a failure.)
      next ShoryukenSqsApp.redis.rpush("rec:aj:refused", job_class) if !sent && send.class.try(:lock_strategy_class)

      sent or raise "enqueue of #{job_class}#{arguments} failed"
    end
  end
end
