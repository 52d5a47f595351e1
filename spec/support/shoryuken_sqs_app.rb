# frozen_string_literal: true

# The app of a REAL Shoryuken 7.0.3 process (`shoryuken -r spec/support/shoryuken_sqs_app.rb -q QUEUE`,
# spec/support/shoryuken_sqs.rb starts it) against a real SQS server (moto). Loaded by Shoryuken's
# own runner, never by rspec. It runs the README's Shoryuken set-up verbatim (its first ```ruby block
# under "## Shoryuken LockMiddleware": LockMiddleware inserted before AutoDelete in Shoryuken's
# default chain), then defines the worker of FERROLOCK_SQS_QUEUE.
#
# The worker's record is independent of ferrolock: plain Redis keys (prefix "rec:") it writes
# itself: every start, every finished run, and any start while another live process or thread
# runs the same job ("overlaps").
require "json"
require "redis"
require "ferrolock"
require "ferrolock/shoryuken"

module ShoryukenSqsApp
  ROOT = File.expand_path("../..", __dir__)
  # queue name => the worker's settings ({"lock" => true | false | {lease:, idempotency_key:}}).
  WORKERS = JSON.parse(ENV.fetch("FERROLOCK_SQS_WORKERS"))

  module_function

  def redis
    @redis ||= Redis.new(url: ENV.fetch("FERROLOCK_RECORD_URL"), timeout: 5)
  end

  # The README's Shoryuken set-up block, verbatim.
  def readme_setup
    readme = File.read(File.join(ROOT, "README.md"))
    section = readme[/^## Shoryuken LockMiddleware\n.*?(?=^## )/m] or raise "README.md: no Shoryuken section"
    section[/^```ruby\n(.*?)^```$/m, 1] or raise "README.md: no ruby block in the Shoryuken section"
  end

  def alive?(pid)
    Process.kill(0, pid)
    true
  rescue Errno::ESRCH
    false
  rescue Errno::EPERM
    true
  end

  # A worker's ferrolock_lock option (false: no lock at all, the chain's LockMiddleware removed).
  def lock_option(config)
    lock = config.fetch("lock", true)
    return lock unless lock.is_a?(Hash)

    lock = lock.transform_keys(&:to_sym)
    # A proc key: the body's "job_key" (a producer's retry sends the job again in a new message).
    lock[:idempotency_key] = ->(_sqs_msg, body) { body["job_key"] } if lock[:idempotency_key] == "proc"
    lock
  end
end

Aws.config.update(endpoint: ENV.fetch("FERROLOCK_SQS_ENDPOINT"), region: "us-east-1",
                  credentials: Aws::Credentials.new("test", "test"))
if ENV["FERROLOCK_SQS_FAST_FAIL"]
  # SQS unreachable fails a call in about a second instead of after the SDK's retries.
  Aws.config.update(retry_limit: 0, http_open_timeout: 1, http_read_timeout: 2)
end
Ferrolock.configure { |c| c.redis_url = ENV.fetch("REDIS_URL") }
Ferrolock.subscribe do |event, _payload|
  ShoryukenSqsApp.redis.incr("rec:event:#{event}")
rescue StandardError
  nil
end

eval(ShoryukenSqsApp.readme_setup, TOPLEVEL_BINDING, "README.md (Shoryuken set-up)") # rubocop:disable Security/Eval

# The workers' perform. Its body: {"id", "sleep", "fail_runs"} (or {"bench": true}).
module SqsJob
  def perform(_sqs_msg, body)
    # bin/bench shoryuken-sqs: only when each message ran.
    return ShoryukenSqsApp.redis.rpush("rec:bench", Time.now.to_f) if body["bench"]

    id = body.fetch("id")
    redis = ShoryukenSqsApp.redis
    me = "#{Process.pid}:#{Thread.current.object_id}"
    running = "rec:running:#{id}"
    others = redis.smembers(running).select { |who| ShoryukenSqsApp.alive?(Integer(who.split(":").first)) }
    redis.rpush("rec:overlaps", id) unless others.empty?
    redis.sadd(running, me)
    attempt = redis.incr("rec:attempt:#{id}")
    redis.rpush("rec:starts", id)
    begin
      sleep body.fetch("sleep", 0)
      raise "job #{id} fails on attempt #{attempt}" if attempt <= body.fetch("fail_runs", 0)

      redis.rpush("rec:done", id)
    ensure
      redis.srem(running, me)
    end
  end
end

# One worker class per queue of FERROLOCK_SQS_WORKERS (SqsJob0, SqsJob1...).
ShoryukenSqsApp::WORKERS.each_with_index do |(queue, config), index|
  worker = Class.new do
    include Shoryuken::Worker
    include SqsJob
  end
  Object.const_set(:"SqsJob#{index}", worker)
  lock = ShoryukenSqsApp.lock_option(config)
  worker.shoryuken_options queue: queue, auto_delete: true, body_parser: :json, ferrolock_lock: lock
  worker.server_middleware { |chain| chain.remove Ferrolock::Shoryuken::LockMiddleware } if lock == false
end
