# frozen_string_literal: true

require "json"
require_relative "support/hostile_input"

# No input may abort the process. Every public entry point that takes seconds, counts or names is
# called with every value of FerrolockTest::HostileInput::VALUES in child processes (a Rust panic
# would raise `fatal` and end them); each child must exit normally, and each case must end exactly
# as listed below: :ok, or an ArgumentError/TypeError (or the primitive's own timeout error) whose
# message names the argument, and for a value above a bound also the bound.
module FerrolockTest
  # What every (entry point, hostile value) case must end with.
  module HostileExpectations
    A = ArgumentError
    T = TypeError
    # Not valid UTF-8, and valid text in another encoding ("ab" in UTF-16LE).
    NOT_UTF8 = ["invalid UTF-8", "binary \\xFF"].freeze
    STRINGS = ["\"5\"", "empty string", "\"\\0\"", "\"a\\nb\"", "10 MB string", *NOT_UTF8, "UTF-16LE"].freeze
    NUMBERS = (FerrolockTest::HostileInput::VALUES.keys - STRINGS - %w[nil BasicObject Proc]).freeze
    FLOATS = ["NaN", "+Infinity", "-Infinity", "1e30", "Float::MAX", "subnormal"].freeze
    # Values above the bound of their kind (the message must state the bound).
    TOO_BIG = ["+Infinity", "1e30", "Float::MAX", "MAX_SECONDS + 1", "2**100", "10 MB string"].freeze

    # Every value ends as `default` unless overridden; a BasicObject or a Proc, which is of no
    # type an argument takes, in a TypeError (unless anything goes).
    def self.table(default, **overrides)
      basic = { "BasicObject" => default == :ok ? :ok : T, "Proc" => default == :ok ? :ok : T }
      FerrolockTest::HostileInput::VALUES.keys.to_h { |label| [label, default] }.merge(basic, overrides)
    end

    # A TTL, lease or connect/read timeout: 1 ms up to MAX_SECONDS.
    TTL = table(A, "nil" => T, "1" => :ok, "MAX_SECONDS" => :ok, **STRINGS.to_h { |s| [s, T] })
    OPTIONAL_TTL = TTL.merge("nil" => :ok)
    # A wait: 0 up to MAX_SECONDS; a tiny positive one is one attempt.
    WAIT = TTL.merge("0" => :ok, "subnormal" => :ok)
    OPTIONAL_WAIT = WAIT.merge("nil" => :ok)
    REPLY_SPIN = WAIT.merge("1" => A, "MAX_SECONDS" => A)
    # A count: an Integer from 1 (or 0) up to MAX_COUNT.
    COUNT = table(T, "-1" => A, "0" => A, "1" => :ok, "MAX_SECONDS" => :ok, "MAX_SECONDS + 1" => :ok, "2**100" => A)
    COUNT_FROM_ZERO = COUNT.merge("0" => :ok)
    # A name: a non-empty String of at most MAX_NAME_BYTES; NUL and newlines are fine.
    NAME = table(T, "\"5\"" => :ok, "empty string" => A, "\"\\0\"" => :ok, "\"a\\nb\"" => :ok, "10 MB string" => A,
                    **NOT_UTF8.to_h { |s| [s, A] }, "UTF-16LE" => :ok)
    # A key part given as an id (FairTenant's tenant, jid): a name, or an Integer.
    ID = NAME.merge(["-1", "0", "1", "MAX_SECONDS", "MAX_SECONDS + 1", "2**100"].to_h { |n| [n, :ok] })
    # FairTenant's storage mode: :exact or :bounded, as a Symbol or String.
    MODE = table(T, **STRINGS.to_h { |s| [s, A] })
    URL = NAME.merge("\"5\"" => A, "\"\\0\"" => A, "\"a\\nb\"" => A, "UTF-16LE" => A)
    # Stored as given, parsed when a client is built.
    URL_SETTING = NAME.merge("nil" => :ok, "10 MB string" => :ok, **NOT_UTF8.to_h { |s| [s, :ok] })
    # Read only for rediss:// connections.
    TLS_CA_FILE = NAME.merge("nil" => :ok, "10 MB string" => :ok)
    CALLABLE = table(T, "nil" => :ok, "Proc" => :ok)
    DUAL_LOCK_KEY = NAME.merge("nil" => :ok, "BasicObject" => A, "Proc" => A)
                        .merge((NUMBERS - FLOATS).to_h { |n| [n, :ok] }, FLOATS.to_h { |f| [f, A] })
    # A whole job hash, a job class or its part that must be of one type: none of the values is.
    ANY_TYPE = table(T)
    # Bucket and leaky: at most one call per microsecond (said instead of the count bound).
    COUNT_PER_SECOND = COUNT.merge("MAX_SECONDS" => A, "MAX_SECONDS + 1" => A)
    # A boolean: none of the values is one.
    BOOLEAN = table(T)
    OPTIONAL_CLIENT = table(T, "nil" => :ok)
    # A port: an Integer from 1 to 65535.
    PORT = table(T, "-1" => A, "0" => A, "1" => :ok, "MAX_SECONDS" => A, "MAX_SECONDS + 1" => A, "2**100" => A)
    # Client#key's text: any String of valid UTF-8 (no length bound: a FairTenant tag holds two
    # names); the name must not be empty (the native layer says so), a part may.
    KEY_NAME = NAME.merge("10 MB string" => :ok)
    KEY_PART = KEY_NAME.merge("empty string" => :ok)
    # An event name to instrument: a Symbol or a String (of valid UTF-8); subscribe only takes
    # those of EVENTS, and none of the values is one.
    INSTRUMENT_EVENT = table(T, **STRINGS.to_h { |s| [s, :ok] }, **NOT_UTF8.to_h { |s| [s, A] })
    SUBSCRIBE_EVENT = table(T, **STRINGS.to_h { |s| [s, A] })
    # An operator's glob on names: any String of valid UTF-8 (nil and "" mean "*").
    # A name pattern: up to 4 x MAX_NAME_BYTES (every SCAN call sends it again).
    PATTERN = INSTRUMENT_EVENT.merge("nil" => :ok, "10 MB string" => A)
    PATTERN_BOUND = "4096 bytes"
    # A SCAN cursor: digits, as a String or an Integer ("" and nil: the start).
    CURSOR = table(A, "nil" => :ok, "0" => :ok, "1" => :ok, "MAX_SECONDS" => :ok, "MAX_SECONDS + 1" => :ok,
                      "\"5\"" => :ok, "empty string" => :ok, "BasicObject" => A, "Proc" => A)
    # A job hash's array of arguments (no value is one), and one argument: any JSON value.
    # (A Proc argument is JSON as its to_s, as Sidekiq itself would push it; bytes that are not UTF-8 are no JSON.)
    JOB_ARGS = table(A, "BasicObject" => A, "Proc" => A)
    JOB_ARG = table(:ok, "NaN" => A, "+Infinity" => A, "-Infinity" => A, "BasicObject" => A,
                         **NOT_UTF8.to_h { |s| [s, A] })
    # A job's due time (epoch seconds): any finite number; a past one is now.
    JOB_AT = table(:ok, "NaN" => A, "+Infinity" => A, "-Infinity" => A, "BasicObject" => T, "Proc" => T)
             .merge(STRINGS.to_h { |s| [s, T] })
    # A lock type or on_conflict strategy: one of a few names (nil: the class's, here none).
    ONE_OF = table(A, "nil" => :ok, "BasicObject" => A, "Proc" => A)
    # Deadline paths against a holder that never lets go: only values that end quickly are run.
    HELD_WAIT = WAIT.merge("0" => Ferrolock::TimeoutError, "subnormal" => Ferrolock::TimeoutError)
                    .except("nil", "1", "MAX_SECONDS")
    FULL_WAIT = WAIT.merge("0" => Ferrolock::OverLimit, "subnormal" => Ferrolock::OverLimit)
                    .except("nil", "1", "MAX_SECONDS")
    FULL_CTOR_WAIT = FULL_WAIT.slice("0", "subnormal", "-1", "NaN", "1e30")

    SECONDS_BOUND = "315360000 seconds (10 years)"
    COUNT_BOUND = "1000000000"
    NAME_BOUND = "1024 bytes"

    # target => [group, argument named in errors, expectations, bound named for TOO_BIG values]
    EXPECTED = {
      "Client.new(url:)" => [:client, "url", URL, nil],
      "Client.new(namespace:)" => [:client, "namespace", NAME, NAME_BOUND],
      "Client.new(connect_timeout:)" => [:client, "connect_timeout", TTL, SECONDS_BOUND],
      "Client.new(read_timeout:)" => [:client, "read_timeout", TTL, SECONDS_BOUND],
      "Client.new(reply_spin:)" => [:client, "reply_spin", REPLY_SPIN, "0.01 seconds"],
      "Client.new(tls_ca_file:)" => [:client, "tls_ca_file", TLS_CA_FILE, nil],
      "Client.new(cluster:)" => [:client, "cluster", table(T), nil],
      "Client.new(cluster: [value])" => [:client, "cluster[0]", URL, NAME_BOUND],
      "Client.new(sentinels: [value])" => [:client, "sentinels[0]", URL, NAME_BOUND],
      "config.redis_cluster=" => [:client, "redis_cluster", table(T, "nil" => :ok), nil],
      "config.redis_sentinel_name=" => [:client, "redis_sentinel_name", NAME.merge("nil" => :ok), NAME_BOUND],
      "config.redis_url=" => [:client, "redis_url", URL_SETTING, nil],
      # nil: back to the default namespace (FERROLOCK_NAMESPACE, else "ferrolock").
      "config.namespace=" => [:client, "namespace", NAME.merge("nil" => :ok), NAME_BOUND],
      "config.connect_timeout=" => [:client, "connect_timeout", TTL, SECONDS_BOUND],
      "config.read_timeout=" => [:client, "read_timeout", TTL, SECONDS_BOUND],
      "config.reply_spin=" => [:client, "reply_spin", REPLY_SPIN, "0.01 seconds"],
      "Client.new(sentinels:, name:)" => [:client, "name", NAME.merge("nil" => A), NAME_BOUND],
      "Client.new(sentinels:, username:)" => [:client, "username", NAME.merge("nil" => :ok), NAME_BOUND],
      "Client.new(sentinels:, db:)" => [:client, "db", COUNT_FROM_ZERO.merge("nil" => :ok), COUNT_BOUND],
      "Client.new(cluster: [{port: value}])" => [:client, "cluster[0][:port]", PORT, nil],
      "Client#key(name)" => [:client, "name", KEY_NAME, nil],
      "Client#key(part)" => [:client, "part", KEY_PART, nil],
      "Ferrolock.instrument(event)" => [:events, "event", INSTRUMENT_EVENT, nil],
      "Ferrolock.subscribe(event)" => [:events, "event", SUBSCRIBE_EVENT, nil],
      "Admin.new(client:)" => [:admin, "client", OPTIONAL_CLIENT, nil],
      "Admin#locks(pattern)" => [:admin, "pattern", PATTERN, PATTERN_BOUND],
      "Admin#uniques(pattern)" => [:admin, "pattern", PATTERN, PATTERN_BOUND],
      "Admin#rate_limiters(pattern)" => [:admin, "pattern", PATTERN, PATTERN_BOUND],
      "Admin#limiters(pattern)" => [:admin, "pattern", PATTERN, PATTERN_BOUND],
      "Admin#markers(queue_pattern)" => [:admin, "pattern", PATTERN, PATTERN_BOUND],
      "Admin#tenants(job_class)" => [:admin, "job_class", NAME.merge("nil" => :ok), NAME_BOUND],
      "Admin#tenants(queue:)" => [:admin, "queue", NAME.merge("nil" => :ok), NAME_BOUND],
      "Admin#locks(cursor:)" => [:admin, "cursor", CURSOR, nil],
      "Admin#locks(per_page:)" => [:admin, "per_page", COUNT, COUNT_BOUND],
      "Admin#show(name)" => [:admin, "name", NAME, NAME_BOUND],
      "Admin#force_release(name)" => [:admin, "name", NAME, NAME_BOUND],
      "Admin#force_release(kind:)" => [:admin, "kind", ONE_OF, nil],
      "Admin#force_release(token:)" => [:admin, "token", NAME.merge("nil" => :ok), NAME_BOUND],
      "DistMutex.new(name)" => [:mutex, "name", NAME, NAME_BOUND],
      "DistMutex.new(expire:)" => [:mutex, "expire", OPTIONAL_TTL, SECONDS_BOUND],
      "DistMutex.new(lease:)" => [:mutex, "lease", TTL, SECONDS_BOUND],
      "DistMutex#lock(timeout:)" => [:mutex, "timeout", OPTIONAL_WAIT, SECONDS_BOUND],
      "DistMutex#lock(wait_timeout:)" => [:mutex, "wait_timeout", OPTIONAL_WAIT, SECONDS_BOUND],
      "DistMutex#synchronize(timeout:)" => [:mutex, "timeout", OPTIONAL_WAIT, SECONDS_BOUND],
      "DistMutex#lock(timeout:) while held" => [:mutex, "timeout", HELD_WAIT, SECONDS_BOUND],
      "DualLock.new(key)" => [:mutex, "key", NAME, NAME_BOUND],
      "DualLock.new(wait_ttl:)" => [:mutex, "wait_ttl", TTL, SECONDS_BOUND],
      "DualLock.new(wait_lease:)" => [:mutex, "wait_lease", TTL, SECONDS_BOUND],
      "DualLock.new(exec_ttl:)" => [:mutex, "exec_ttl", TTL, SECONDS_BOUND],
      "DualLock.new(lease:)" => [:mutex, "lease", TTL, SECONDS_BOUND],
      "DualLock.new(max_wait:)#run" => [:mutex, "max_wait", OPTIONAL_WAIT, SECONDS_BOUND],
      "DualLock.new(wait_timeout:)#run" => [:mutex, "wait_timeout", OPTIONAL_WAIT, SECONDS_BOUND],
      "ConcurrentLimiter.new(name)" => [:limiter, "name", NAME, NAME_BOUND],
      "ConcurrentLimiter.new(count)" => [:limiter, "count", COUNT, COUNT_BOUND],
      "ConcurrentLimiter.new(wait_timeout:)" => [:limiter, "wait_timeout", WAIT, SECONDS_BOUND],
      "ConcurrentLimiter.new(lock_timeout:)" => [:limiter, "lock_timeout", TTL, SECONDS_BOUND],
      "ConcurrentLimiter.new(lease:)" => [:limiter, "lease", TTL, SECONDS_BOUND],
      "ConcurrentLimiter#within_limit(wait_timeout:)" => [:limiter, "wait_timeout", WAIT, SECONDS_BOUND],
      "ConcurrentLimiter#within_limit(wait_timeout:) when full" => [:limiter, "wait_timeout", FULL_WAIT, SECONDS_BOUND],
      "ConcurrentLimiter.new(wait_timeout:)#within_limit when full" =>
        [:limiter, "wait_timeout", FULL_CTOR_WAIT, SECONDS_BOUND],
      "fair_tenant_queues threshold" => [:integration, "fair_tenant_queues[0].threshold", COUNT, COUNT_BOUND],
      "fair_tenant_queues per" => [:integration, "fair_tenant_queues[0].per", TTL.merge("\"5\"" => :ok), SECONDS_BOUND],
      "MessageLock.new(lock_ttl:)" => [:integration, "lock_ttl", TTL, SECONDS_BOUND],
      "MessageLock.new(lease:)" => [:integration, "lease", TTL, SECONDS_BOUND],
      "MessageLock.new(processed_ttl:)" => [:integration, "processed_ttl", TTL, SECONDS_BOUND],
      "MessageLock#process(queue)" => [:integration, "queue", NAME, NAME_BOUND],
      "MessageLock#process(message_id)" => [:integration, "message_id", NAME, NAME_BOUND],
      "Shoryuken::Lock.new(lock_ttl:)" => [:integration, "lock_ttl", TTL, SECONDS_BOUND],
      "Shoryuken::LockMiddleware.new(lease:)" => [:integration, "lease", TTL, SECONDS_BOUND],
      "Shoryuken::Lock.new(processed_ttl:)" => [:integration, "processed_ttl", TTL, SECONDS_BOUND],
      "Shoryuken.configure lock_ttl" => [:integration, "lock_ttl", TTL, SECONDS_BOUND],
      "Shoryuken.configure lease" => [:integration, "lease", TTL, SECONDS_BOUND],
      "Shoryuken::Lock.new(options)" => [:integration, "options", table(T, "nil" => :ok), nil],
      "Shoryuken::Lock.new(client:)" => [:integration, "client", OPTIONAL_CLIENT, nil],
      "Shoryuken::Lock.new(enabled:)" => [:integration, "enabled", BOOLEAN, nil],
      "Shoryuken::Lock.new(on_redis_error:)" => [:integration, "on_redis_error", ONE_OF.merge("nil" => A), nil],
      "shoryuken_options ferrolock_lock:" => [:integration, "ferrolock_lock", table(T, "nil" => :ok), nil],
      "sidekiq_options dual_lock: wait_ttl" => [:integration, "wait_ttl", TTL, SECONDS_BOUND],
      "sidekiq_options dual_lock: wait_lease" => [:integration, "wait_lease", TTL, SECONDS_BOUND],
      "sidekiq_options dual_lock: exec_ttl" => [:integration, "exec_ttl", TTL, SECONDS_BOUND],
      "sidekiq_options dual_lock: lease" => [:integration, "lease", TTL, SECONDS_BOUND],
      "sidekiq_options dual_lock: max_wait" => [:integration, "max_wait", WAIT, SECONDS_BOUND],
      "sidekiq_options dual_lock: wait_timeout" => [:integration, "wait_timeout", WAIT, SECONDS_BOUND],
      "sidekiq_options dual_lock: key" => [:integration, "key", DUAL_LOCK_KEY, nil],
      "DualLock::Middleware.new(backoff:)" => [:integration, "backoff", CALLABLE, nil],
      "LimiterMiddleware.new(max_reschedules:)" => [:integration, "max_reschedules", COUNT_FROM_ZERO, COUNT_BOUND],
      "LimiterMiddleware.new(backoff:)" => [:integration, "backoff", CALLABLE, nil],
      # A backoff proc's nonsense falls back to the default delay (about 1 s for a first reschedule).
      "LimiterMiddleware backoff proc returning" => [:integration, "backoff", table(:ok), nil],
      "DualLock::Middleware backoff proc returning" => [:integration, "backoff", table(:ok), nil],
      "RateLimiter.window(name)" => [:rate_limiter, "name", NAME, NAME_BOUND],
      "RateLimiter.window(count)" => [:rate_limiter, "count", COUNT, COUNT_BOUND],
      "RateLimiter.window(interval)" => [:rate_limiter, "interval", TTL, SECONDS_BOUND],
      "RateLimiter.window(wait_timeout:)" => [:rate_limiter, "wait_timeout", WAIT, SECONDS_BOUND],
      "RateLimiter.window(sliding:)" => [:rate_limiter, "sliding", BOOLEAN, nil],
      "RateLimiter.window(client:)" => [:rate_limiter, "client", OPTIONAL_CLIENT, nil],
      "RateLimiter.window(sliding: true, count)" => [:rate_limiter, "count", COUNT, COUNT_BOUND],
      "RateLimiter.bucket(count)" => [:rate_limiter, "count", COUNT, COUNT_BOUND],
      "RateLimiter.bucket(count) per second" => [:rate_limiter, "count", COUNT_PER_SECOND, nil],
      "RateLimiter.leaky(count) per second" => [:rate_limiter, "count", COUNT_PER_SECOND, nil],
      "RateLimiter.bucket(interval)" => [:rate_limiter, "interval", TTL, SECONDS_BOUND],
      "RateLimiter.leaky(count)" => [:rate_limiter, "count", COUNT, COUNT_BOUND],
      "RateLimiter.leaky(interval)" => [:rate_limiter, "interval", TTL, SECONDS_BOUND],
      "RateLimiter.leaky(burst:)" => [:rate_limiter, "burst", COUNT_FROM_ZERO, COUNT_BOUND],
      "RateLimiter.points(points)" => [:rate_limiter, "points", COUNT, COUNT_BOUND],
      # 1 to the limiter's 10 points.
      "RateLimiter#within_limit(cost) of points" =>
        [:rate_limiter, "cost", COUNT.merge("MAX_SECONDS" => A, "MAX_SECONDS + 1" => A), nil],
      "RateLimiter#within_limit(wait_timeout:)" => [:rate_limiter, "wait_timeout", WAIT, SECONDS_BOUND],
      "RateLimiter#within_limit(wait_timeout:) when full" => [:rate_limiter, "wait_timeout", FULL_WAIT, SECONDS_BOUND],
      "UniqueClientMiddleware#call(job)" => [:unique, "job", ANY_TYPE, nil],
      "UniqueClientMiddleware job class" => [:unique, "class", NAME, NAME_BOUND],
      "UniqueClientMiddleware job args" => [:unique, "args", JOB_ARGS, nil],
      "UniqueClientMiddleware job args: [value]" => [:unique, "args", JOB_ARG, nil],
      "UniqueClientMiddleware job jid" => [:unique, "jid", NAME, NAME_BOUND],
      "UniqueClientMiddleware job at" => [:unique, "at", JOB_AT, nil],
      "UniqueClientMiddleware job lock" => [:unique, "lock", ONE_OF, nil],
      "UniqueClientMiddleware job lock_ttl" => [:unique, "lock_ttl", OPTIONAL_TTL, SECONDS_BOUND],
      "UniqueClientMiddleware job lock_timeout" => [:unique, "lock_timeout", OPTIONAL_WAIT, SECONDS_BOUND],
      "UniqueClientMiddleware job lock_lease" => [:unique, "lock_lease", OPTIONAL_TTL, SECONDS_BOUND],
      "UniqueClientMiddleware job on_conflict" => [:unique, "on_conflict", ONE_OF, nil],
      "UniqueClientMiddleware job lock_args_method" => [:unique, "lock_args_method", ONE_OF, nil],
      "UniqueServerMiddleware#call(job)" => [:unique, "job", ANY_TYPE, nil],
      "UniqueServerMiddleware.validate!(job class)" => [:unique, "job class", ANY_TYPE, nil],
      "FairTenant.queue_for(rules)" => [:fair_tenant, "fair_tenant_queues", table(T, "nil" => :ok), nil],
      "FairTenant.queue_for(job_class:)" => [:fair_tenant, "job_class", NAME, NAME_BOUND],
      "FairTenant.queue_for(tenant:)" => [:fair_tenant, "tenant", ID, NAME_BOUND],
      "FairTenant.queue_for(jid:)" => [:fair_tenant, "jid", ID, NAME_BOUND],
      "FairTenant.queue_for(mode:)" => [:fair_tenant, "mode", MODE.merge("nil" => :ok), nil],
      "FairTenant.queue_for(client:)" => [:fair_tenant, "client", OPTIONAL_CLIENT, nil],
      "FairTenant.key(job_class)" => [:fair_tenant, "job_class", NAME, NAME_BOUND],
      "FairTenant.key(tenant)" => [:fair_tenant, "tenant", ID, NAME_BOUND],
      "FairTenant.verify!(job_classes)" => [:fair_tenant, "job_classes", table(T, "nil" => :ok), nil],
      "FairTenant.verify!([value])" => [:fair_tenant, "job_classes[0]", ANY_TYPE, nil],
      # Without Sidekiq loaded, no queues: is Ferrolock::Error ("needs Sidekiq loaded, or queues:").
      "FairTenant.verify!(queues:)" => [:fair_tenant, "queues", table(T, "nil" => Ferrolock::Error), nil],
      "FairTenant.verify!(queues: [value])" => [:fair_tenant, "queues[0]", NAME, NAME_BOUND],
      "config.fair_tenant_mode=" => [:fair_tenant, "fair_tenant_mode", MODE, nil],
      "LimiterMiddleware.new(options)" => [:middleware, "options", ANY_TYPE, nil],
      "DualLock::Middleware.new(options)" => [:middleware, "options", ANY_TYPE, nil],
      "DualLock::Middleware.new(client:)" => [:middleware, "client", OPTIONAL_CLIENT, nil],
      "DualLock::Middleware.validate!(job class)" => [:middleware, "job class", ANY_TYPE, nil],
      "UniqueClientMiddleware.new(options)" => [:middleware, "options", ANY_TYPE, nil],
      "UniqueClientMiddleware.new(client:)" => [:middleware, "client", OPTIONAL_CLIENT, nil],
      "UniqueServerMiddleware.new(options)" => [:middleware, "options", ANY_TYPE, nil],
      "UniqueServerMiddleware.new(client:)" => [:middleware, "client", OPTIONAL_CLIENT, nil],
      "FairTenant::ClientMiddleware.new(options)" => [:middleware, "options", ANY_TYPE, nil],
      "FairTenant::ClientMiddleware.new(client:)" => [:middleware, "client", OPTIONAL_CLIENT, nil],
      # true or a Hash; nil (and false) mean "not opted in".
      "sidekiq_options dual_lock:" =>
        [:middleware, "dual_lock", table(A, "nil" => :ok, "BasicObject" => A, "Proc" => A), nil]
    }.freeze

    CHILD = <<~RUBY.freeze
      require "ferrolock"
      require "ferrolock/shoryuken"
      require "ferrolock/sidekiq/dual_lock/middleware"
      require "ferrolock/sidekiq/limiter_middleware"
      require "ferrolock/sidekiq/unique/client_middleware"
      require "ferrolock/sidekiq/unique/server_middleware"
      require "ferrolock/admin"
      require "logger"
      require #{File.join(__dir__, "support", "hostile_input").inspect}
      Ferrolock.config.logger = Logger.new(File::NULL)
      only = JSON.parse(ENV.fetch("HOSTILE_ONLY"))
      FerrolockTest::HostileInput.run(ENV.fetch("HOSTILE_GROUP").to_sym, only_values: only)
    RUBY
  end
end

RSpec.describe "hostile input" do
  # A constant here would be top-level; the table lives in FerrolockTest::HostileExpectations.
  cases = FerrolockTest::HostileExpectations

  def run_group(group)
    x = FerrolockTest::HostileExpectations
    only = x::EXPECTED.select { |_, (g, *)| g == group }.transform_values { |(_, _, expectations)| expectations.keys }
    env = { "HOSTILE_GROUP" => group.to_s, "HOSTILE_ONLY" => JSON.generate(only) }
    out, err, status = run_ruby(x::CHILD, env: env, timeout: 120)
    expect(status.success?).to be(true), "the child died (#{status.inspect}):\n#{err[0, 3000]}"
    expect(err).not_to match(/fatal|panicked|\[BUG\]/)
    out.lines.map { |line| JSON.parse(line) }
  end

  def check(result)
    x = FerrolockTest::HostileExpectations
    _, arg, expectations, bound = x::EXPECTED.fetch(result["target"])
    expected = expectations.fetch(result["value"])
    label = "#{result["target"]} with #{result["value"]}"
    outcome = result["outcome"]
    if expected == :ok
      expect(outcome).to eq("ok"), "#{label}: expected success, got #{outcome}: #{result["message"]}"
      return
    end
    expect(outcome).to eq(expected.name), "#{label}: expected #{expected}, got #{outcome}: #{result["message"]}"
    return unless [ArgumentError, TypeError].include?(expected)

    expect(result["message"]).to include(arg), "#{label}: the message does not name #{arg}: #{result["message"]}"
    return unless bound && expected == ArgumentError && x::TOO_BIG.include?(result["value"])

    expect(result["message"]).to include(bound), "#{label}: the message does not state #{bound}: #{result["message"]}"
  end

  %i[client mutex limiter integration rate_limiter unique fair_tenant middleware events admin].each do |group|
    it "survives every hostile value given to the #{group} entry points, each failing as listed" do
      results = run_group(group)
      planned = cases::EXPECTED.select { |_, (g, *)| g == group }.sum { |_, (_, _, expectations)| expectations.size }
      expect(results.size).to eq(planned)
      results.each { |result| check(result) }
    end
  end

  it "falls back to the default delay when a backoff proc answers nonsense, and keeps sane answers" do
    results = run_group(:integration)
    ["LimiterMiddleware backoff proc returning", "DualLock::Middleware backoff proc returning"].each do |target|
      delays = results.select { |r| r["target"] == target }.to_h { |r| [r["value"], r["result"]] }
      expect(delays.slice("0", "subnormal", "1", "MAX_SECONDS"))
        .to eq("0" => 0.0, "subnormal" => 5e-324, "1" => 1.0, "MAX_SECONDS" => 315_360_000.0)
      nonsense = delays.except("0", "subnormal", "1", "MAX_SECONDS")
      expect(nonsense.size).to eq(FerrolockTest::HostileInput::VALUES.size - 4)
      expect(nonsense.values).to all(be_between(1.0, 1.5))
    end
  end

  it "turns a Rust panic outside any GVL-free call into Ferrolock::Error, and the process carries on" do
    out, err, status = run_ruby(<<~RUBY)
      require "ferrolock"
      begin
        Ferrolock::Native.panic_with_gvl_for_test
      rescue StandardError => e
        puts "\#{e.class}: \#{e.message}"
      end
      puts Ferrolock.client.ping
    RUBY
    expect(status.success?).to be(true), err
    expect(out).to eq("Ferrolock::Error: internal error in ferrolock: deliberate panic with the GVL held\nPONG\n")
  end

  it "registers every native function and method through the panic guard" do
    sources = Dir[File.join(FerrolockTest::ROOT, "ext/ferrolock/src/**/*.rs")]
    registrations = sources.flat_map do |path|
      code = File.readlines(path).grep_v(%r{\A\s*//}).join
      code.scan(/(?:function|method)!\(\s*[^,]+/).map { |call| [File.basename(path), call] }
    end
    expect(registrations.size).to be > 30
    unguarded = registrations.reject { |(_, call)| call.match?(/!\(\s*(crate::)?guard::/) }
    expect(unguarded).to eq([])
  end

  describe "names" do
    it "accepts NUL and newlines as ordinary bytes of a name (Redis keys are binary-safe)" do
      Ferrolock::DistMutex.new("x\0y").synchronize do
        expect(Ferrolock::DistMutex.new("x\0y").locked?).to be(true)
        expect(Ferrolock::DistMutex.new("x").locked?).to be(false)
        expect(Ferrolock::DistMutex.new("x\ny").locked?).to be(false)
      end
    end

    it "accepts MAX_NAME_BYTES bytes and rejects one more, naming the argument and the bound" do
      expect(Ferrolock::MAX_NAME_BYTES).to eq(1024)
      expect(Ferrolock::DistMutex.new("é" * 512).name.bytesize).to eq(1024)
      expect { Ferrolock::DistMutex.new("#{"é" * 512}x") }
        .to raise_error(ArgumentError, "name must be at most 1024 bytes, got 1025 bytes")
    end

    it "takes binary Strings that are valid UTF-8 and rejects other bytes with ArgumentError" do
      expect(Ferrolock::DualLock.new("plain".b).key.encoding).to eq(Encoding::UTF_8)
      expect { Ferrolock::DualLock.new("\xff".b) }.to raise_error(ArgumentError, /key must be valid UTF-8/)
      expect { Ferrolock::ConcurrentLimiter.new((+"\xC3").force_encoding("UTF-8"), 1) }
        .to raise_error(ArgumentError, /name must be valid UTF-8/)
    end
  end

  describe "seconds" do
    it "accepts Integer, Float, Rational and exactly MAX_SECONDS" do
      expect(Ferrolock::MAX_SECONDS).to eq(315_360_000)
      mutex = Ferrolock::DistMutex.new("r", lease: Rational(1, 3), expire: Ferrolock::MAX_SECONDS)
      expect(mutex).to be_a(Ferrolock::DistMutex)
      expect { Ferrolock::DistMutex.new("r", lease: Complex(1, 1)) }.to raise_error(TypeError, /lease/)
    end

    it "says what was wrong and what the bound is" do
      expect { Ferrolock::DistMutex.new("a", lease: 1e30) }
        .to raise_error(ArgumentError, "lease must be at most 315360000 seconds (10 years), got 1.0e+30")
      expect { Ferrolock::DistMutex.new("a", lease: 0.0001) }
        .to raise_error(ArgumentError, "lease must be at least 0.001 seconds (1 ms), got 0.0001")
    end

    it "is checked again by the native layer, naming the argument" do
      native = Ferrolock.client.native
      expect { Ferrolock::Native::ConcurrentLimiter.new(native, "n", 1, 1e30, 0, 0, true) }
        .to raise_error(ArgumentError, /\Alease: .*315360000 seconds \(10 years\), got 1e30\z/)
      expect { Ferrolock::Native::MessageLock.new(native, 60.0, 0.0001) }
        .to raise_error(ArgumentError, /\Aprocessed_ttl: must be at least 0.001/)
      lock = Ferrolock::Native::DualLock.new(native, "n", 60.0, 60.0, 0)
      ticket = lock.enter(nil)
      expect { lock.wait(ticket, Float::NAN) }.to raise_error(ArgumentError, /\Await_timeout: /)
      lock.leave(ticket)
    end
  end
end
