# frozen_string_literal: true

require "json"

module FerrolockTest
  # The child-process half of spec/hostile_input_spec.rb: every public entry point that takes
  # seconds, counts or names, called with every hostile value. The spec runs a group of targets
  # in a child (a panic or `fatal` must not take the spec process down) and reads one JSON line
  # per case: the outcome's class ("ok" when it returned) and message.
  module HostileInput
    MAX = 315_360_000 # Ferrolock::MAX_SECONDS, spelled out so the table is readable alone

    VALUES = {
      "nil" => nil,
      "-1" => -1,
      "0" => 0,
      "NaN" => Float::NAN,
      "+Infinity" => Float::INFINITY,
      "-Infinity" => -Float::INFINITY,
      "1e30" => 1e30,
      "Float::MAX" => Float::MAX,
      "subnormal" => 5e-324,
      "1" => 1,
      "MAX_SECONDS" => MAX,
      "MAX_SECONDS + 1" => MAX + 1,
      "2**100" => 2**100,
      "\"5\"" => "5",
      "empty string" => "",
      "\"\\0\"" => "\0",
      "\"a\\nb\"" => "a\nb",
      "10 MB string" => "x" * (10 * 1024 * 1024),
      # Not UTF-8: the native layer takes UTF-8 only, and to_sym/match? raise on these.
      "invalid UTF-8" => (+"\xFF").force_encoding(Encoding::UTF_8).freeze,
      "binary \\xFF" => "\xFF".b.freeze,
      # Valid text in another encoding ("ab"): converted, never compared raw with UTF-8.
      "UTF-16LE" => "ab".encode(Encoding::UTF_16LE).freeze,
      # A callable where a value is wanted (its to_s, "#<Proc:0x…>", must not become a name).
      "Proc" => proc { 1 },
      # No is_a?, respond_to?, nil? or inspect: checks must not call the value's own methods.
      "BasicObject" => BasicObject.new
    }.freeze

    # A sentinel address nothing listens on: building a client connects to nothing yet.
    SENTINEL = "redis://127.0.0.1:1"

    # A stand-in for a Sidekiq job class with sidekiq_options.
    JobClass = Struct.new(:name, :options) do
      def get_sidekiq_options = options # rubocop:disable Naming/AccessorMethodName -- Sidekiq's name
      def to_s = name
    end

    # A loaded job class without uniqueness options of its own (the child does not load Sidekiq):
    # the cases give the lock per push, in the job hash.
    class UniqueJob
      def self.get_sidekiq_options = {} # rubocop:disable Naming/AccessorMethodName -- Sidekiq's name
    end

    @serial = 0

    class << self
      def unique(prefix)
        @serial += 1
        "#{prefix}-#{Process.pid}-#{@serial}"
      end

      def client_targets
        {
          "Client.new(url:)" => ->(v) { Ferrolock::Client.new(url: v) },
          "Client.new(namespace:)" => ->(v) { Ferrolock::Client.new(namespace: v) },
          "Client.new(connect_timeout:)" => ->(v) { Ferrolock::Client.new(connect_timeout: v) },
          "Client.new(read_timeout:)" => ->(v) { Ferrolock::Client.new(read_timeout: v) },
          "Client.new(reply_spin:)" => ->(v) { Ferrolock::Client.new(reply_spin: v) },
          "Client.new(tls_ca_file:)" => ->(v) { Ferrolock::Client.new(tls_ca_file: v) },
          "Client.new(cluster:)" => ->(v) { Ferrolock::Client.new(cluster: v) },
          "Client.new(cluster: [value])" => ->(v) { Ferrolock::Client.new(cluster: [v]) },
          "Client.new(sentinels: [value])" => ->(v) { Ferrolock::Client.new(name: "mymaster", sentinels: [v]) },
          "config.redis_cluster=" => ->(v) { configure(:redis_cluster, v) },
          "config.redis_sentinel_name=" => ->(v) { configure(:redis_sentinel_name, v) },
          "config.redis_url=" => ->(v) { configure(:redis_url, v) },
          "config.namespace=" => ->(v) { configure(:namespace, v) },
          "config.connect_timeout=" => ->(v) { configure(:connect_timeout, v) },
          "config.read_timeout=" => ->(v) { configure(:read_timeout, v) },
          "config.reply_spin=" => ->(v) { configure(:reply_spin, v) },
          "Client.new(sentinels:, name:)" => ->(v) { Ferrolock::Client.new(name: v, sentinels: [SENTINEL]) },
          "Client.new(sentinels:, username:)" => lambda { |v|
            Ferrolock::Client.new(name: "mymaster", username: v, sentinels: [SENTINEL])
          },
          "Client.new(sentinels:, db:)" => lambda { |v|
            Ferrolock::Client.new(name: "mymaster", db: v, sentinels: [SENTINEL])
          },
          "Client.new(cluster: [{port: value}])" => ->(v) { Ferrolock::Client.new(cluster: [{ host: "h", port: v }]) },
          "Client#key(name)" => ->(v) { Ferrolock.client.key(v, "lock") },
          "Client#key(part)" => ->(v) { Ferrolock.client.key("n", v) }
        }
      end

      # Ferrolock.instrument and Ferrolock.subscribe's event names.
      def events_targets
        {
          "Ferrolock.instrument(event)" => ->(v) { Ferrolock.instrument(v) },
          "Ferrolock.subscribe(event)" => ->(v) { Ferrolock.unsubscribe(Ferrolock.subscribe(v) { nil }) }
        }
      end

      # The operators' read model and force release (Ferrolock::Admin), on an empty namespace.
      def admin_targets
        {
          "Admin.new(client:)" => ->(v) { Ferrolock::Admin.new(client: v) },
          "Admin#locks(pattern)" => ->(v) { admin.locks(v) },
          "Admin#uniques(pattern)" => ->(v) { admin.uniques(v) },
          "Admin#rate_limiters(pattern)" => ->(v) { admin.rate_limiters(v) },
          "Admin#limiters(pattern)" => ->(v) { admin.limiters(v) },
          "Admin#markers(queue_pattern)" => ->(v) { admin.markers(v) },
          "Admin#tenants(job_class)" => ->(v) { admin.tenants(v) },
          "Admin#tenants(queue:)" => ->(v) { admin.tenants(queue: v) },
          "Admin#locks(cursor:)" => ->(v) { admin.locks(cursor: v) },
          "Admin#locks(per_page:)" => ->(v) { admin.locks(per_page: v) },
          "Admin#show(name)" => ->(v) { admin.show(v) },
          "Admin#force_release(name)" => ->(v) { admin.force_release(v) },
          "Admin#force_release(kind:)" => ->(v) { admin.force_release("n", kind: v) },
          "Admin#force_release(token:)" => ->(v) { admin.force_release("n", token: v) }
        }
      end

      def mutex_targets
        {
          "DistMutex.new(name)" => ->(v) { Ferrolock::DistMutex.new(v) },
          "DistMutex.new(expire:)" => ->(v) { Ferrolock::DistMutex.new(unique("m"), expire: v) },
          "DistMutex.new(lease:)" => ->(v) { Ferrolock::DistMutex.new(unique("m"), lease: v) },
          "DistMutex#lock(timeout:)" => ->(v) { Ferrolock::DistMutex.new(unique("m")).lock(timeout: v).unlock },
          "DistMutex#lock(wait_timeout:)" => lambda { |v|
                                               Ferrolock::DistMutex.new(unique("m")).lock(wait_timeout: v).unlock
                                             },
          "DistMutex#synchronize(timeout:)" => lambda { |v|
            Ferrolock::DistMutex.new(unique("m")).synchronize(timeout: v) { 1 }
          },
          "DistMutex#lock(timeout:) while held" => ->(v) { while_held_mutex { |m| m.lock(timeout: v) } },
          "DualLock.new(key)" => ->(v) { Ferrolock::DualLock.new(v) },
          "DualLock.new(wait_ttl:)" => ->(v) { Ferrolock::DualLock.new(unique("d"), wait_ttl: v) },
          "DualLock.new(wait_lease:)" => ->(v) { Ferrolock::DualLock.new(unique("d"), wait_lease: v) },
          "DualLock.new(exec_ttl:)" => ->(v) { Ferrolock::DualLock.new(unique("d"), exec_ttl: v) },
          "DualLock.new(lease:)" => ->(v) { Ferrolock::DualLock.new(unique("d"), lease: v) },
          "DualLock.new(max_wait:)#run" => ->(v) { Ferrolock::DualLock.new(unique("d"), max_wait: v).run { 1 } },
          "DualLock.new(wait_timeout:)#run" => ->(v) { Ferrolock::DualLock.new(unique("d"), wait_timeout: v).run { 1 } }
        }
      end

      def limiter_targets
        {
          "ConcurrentLimiter.new(name)" => ->(v) { Ferrolock::ConcurrentLimiter.new(v, 1) },
          "ConcurrentLimiter.new(count)" => ->(v) { Ferrolock::ConcurrentLimiter.new(unique("l"), v) },
          "ConcurrentLimiter.new(wait_timeout:)" => ->(v) { limiter(wait_timeout: v) },
          "ConcurrentLimiter.new(lock_timeout:)" => ->(v) { limiter(lock_timeout: v) },
          "ConcurrentLimiter.new(lease:)" => ->(v) { limiter(lease: v) },
          "ConcurrentLimiter#within_limit(wait_timeout:)" => lambda { |v|
            Ferrolock::ConcurrentLimiter.new(unique("l"), 1).within_limit(wait_timeout: v) { 1 }
          },
          "ConcurrentLimiter#within_limit(wait_timeout:) when full" => ->(v) { while_full_limiter(v) },
          "ConcurrentLimiter.new(wait_timeout:)#within_limit when full" => ->(v) { while_full_limiter(nil, v) }
        }
      end

      def integration_targets
        {
          "fair_tenant_queues threshold" => ->(v) { fair_tenant_rules(threshold: v) },
          "fair_tenant_queues per" => ->(v) { fair_tenant_rules(per: v) },
          "MessageLock.new(lock_ttl:)" => ->(v) { Ferrolock::Shoryuken::MessageLock.new(lock_ttl: v) },
          "MessageLock.new(lease:)" => ->(v) { Ferrolock::Shoryuken::MessageLock.new(lease: v) },
          "MessageLock.new(processed_ttl:)" => ->(v) { Ferrolock::Shoryuken::MessageLock.new(processed_ttl: v) },
          "MessageLock#process(queue)" => ->(v) { message_lock.process(v, unique("id")) { 1 } },
          "MessageLock#process(message_id)" => ->(v) { message_lock.process("q", v) { 1 } },
          "Shoryuken::Lock.new(lock_ttl:)" => ->(v) { Ferrolock::Shoryuken::LockMiddleware.new(lock_ttl: v) },
          "Shoryuken::LockMiddleware.new(lease:)" => ->(v) { Ferrolock::Shoryuken::LockMiddleware.new(lease: v) },
          "Shoryuken::Lock.new(processed_ttl:)" => ->(v) { Ferrolock::Shoryuken::LockMiddleware.new(processed_ttl: v) },
          "Shoryuken.configure lock_ttl" => ->(v) { shoryuken_configure(:lock_ttl, v) },
          "Shoryuken.configure lease" => ->(v) { shoryuken_configure(:lease, v) },
          "Shoryuken::Lock.new(options)" => ->(v) { Ferrolock::Shoryuken::LockMiddleware.new(v) },
          "Shoryuken::Lock.new(client:)" => ->(v) { Ferrolock::Shoryuken::LockMiddleware.new(client: v) },
          "Shoryuken::Lock.new(enabled:)" => ->(v) { Ferrolock::Shoryuken::LockMiddleware.new(enabled: v) },
          "Shoryuken::Lock.new(on_redis_error:)" => lambda { |v|
                                                      Ferrolock::Shoryuken::LockMiddleware.new(on_redis_error: v)
                                                    },
          "shoryuken_options ferrolock_lock:" => ->(v) { Ferrolock::Shoryuken::Options.from_worker(v) },
          "sidekiq_options dual_lock: wait_ttl" => ->(v) { dual_lock_settings(wait_ttl: v) },
          "sidekiq_options dual_lock: wait_lease" => ->(v) { dual_lock_settings(wait_lease: v) },
          "sidekiq_options dual_lock: exec_ttl" => ->(v) { dual_lock_settings(exec_ttl: v) },
          "sidekiq_options dual_lock: lease" => ->(v) { dual_lock_settings(lease: v) },
          "sidekiq_options dual_lock: max_wait" => ->(v) { dual_lock_settings(max_wait: v) },
          "sidekiq_options dual_lock: wait_timeout" => ->(v) { dual_lock_settings(wait_timeout: v) },
          "sidekiq_options dual_lock: key" => ->(v) { dual_lock_settings(key: v) },
          "DualLock::Middleware.new(backoff:)" => ->(v) { Ferrolock::Sidekiq::DualLock::Middleware.new(backoff: v) },
          "LimiterMiddleware.new(max_reschedules:)" => lambda { |v|
            Ferrolock::Sidekiq::LimiterMiddleware.new(max_reschedules: v)
          },
          "LimiterMiddleware.new(backoff:)" => ->(v) { Ferrolock::Sidekiq::LimiterMiddleware.new(backoff: v) },
          "LimiterMiddleware backoff proc returning" => ->(v) { limiter_backoff_delay(v) },
          "DualLock::Middleware backoff proc returning" => ->(v) { dual_lock_backoff_delay(v) }
        }
      end

      # FairTenant without Sidekiq: queue_for's and key's arguments, verify!'s, the mode setting.
      def fair_tenant_targets
        {
          "FairTenant.queue_for(rules)" => ->(v) { queue_for(rules: v) },
          "FairTenant.queue_for(job_class:)" => ->(v) { queue_for(job_class: v) },
          "FairTenant.queue_for(tenant:)" => ->(v) { queue_for(tenant: v) },
          "FairTenant.queue_for(jid:)" => ->(v) { queue_for(jid: v) },
          "FairTenant.queue_for(mode:)" => ->(v) { queue_for(mode: v) },
          "FairTenant.queue_for(client:)" => ->(v) { queue_for(client: v) },
          "FairTenant.key(job_class)" => ->(v) { Ferrolock::FairTenant.key(v, "tenant") },
          "FairTenant.key(tenant)" => ->(v) { Ferrolock::FairTenant.key("HostileJob", v) },
          "FairTenant.verify!(job_classes)" => ->(v) { Ferrolock::FairTenant.verify!(v, queues: ["default"]) },
          "FairTenant.verify!([value])" => ->(v) { Ferrolock::FairTenant.verify!([v], queues: ["default"]) },
          "FairTenant.verify!(queues:)" => ->(v) { Ferrolock::FairTenant.verify!([], queues: v) },
          "FairTenant.verify!(queues: [value])" => ->(v) { Ferrolock::FairTenant.verify!([], queues: [v]) },
          "config.fair_tenant_mode=" => ->(v) { configure(:fair_tenant_mode, v) }
        }
      end

      # The Sidekiq middlewares' constructor options (`chain.add Klass, option: value`), and the
      # dual_lock option itself.
      def middleware_targets
        {
          "LimiterMiddleware.new(options)" => ->(v) { Ferrolock::Sidekiq::LimiterMiddleware.new(v) },
          "DualLock::Middleware.new(options)" => ->(v) { Ferrolock::Sidekiq::DualLock::Middleware.new(v) },
          "DualLock::Middleware.new(client:)" => ->(v) { Ferrolock::Sidekiq::DualLock::Middleware.new(client: v) },
          "DualLock::Middleware.validate!(job class)" => lambda { |v|
                                                           Ferrolock::Sidekiq::DualLock::Middleware.validate!(v)
                                                         },
          "UniqueClientMiddleware.new(options)" => ->(v) { Ferrolock::Sidekiq::Unique::ClientMiddleware.new(v) },
          "UniqueClientMiddleware.new(client:)" => lambda { |v|
                                                     Ferrolock::Sidekiq::Unique::ClientMiddleware.new(client: v)
                                                   },
          "UniqueServerMiddleware.new(options)" => ->(v) { Ferrolock::Sidekiq::Unique::ServerMiddleware.new(v) },
          "UniqueServerMiddleware.new(client:)" => lambda { |v|
                                                     Ferrolock::Sidekiq::Unique::ServerMiddleware.new(client: v)
                                                   },
          "FairTenant::ClientMiddleware.new(options)" => ->(v) { Ferrolock::Sidekiq::FairTenantMiddleware.new(v) },
          "FairTenant::ClientMiddleware.new(client:)" => lambda { |v|
            Ferrolock::Sidekiq::FairTenantMiddleware.new(client: v)
          },
          "sidekiq_options dual_lock:" => lambda { |v|
            Ferrolock::Sidekiq::DualLock::Settings.for(JobClass.new("HostileJob", { "dual_lock" => v }))
          }
        }
      end

      def rate_limiter_targets
        {
          "RateLimiter.window(name)" => ->(v) { used(Ferrolock::RateLimiter.window(v, 1, 1)) },
          "RateLimiter.window(count)" => ->(v) { used(Ferrolock::RateLimiter.window(unique("w"), v, 1)) },
          "RateLimiter.window(interval)" => ->(v) { used(Ferrolock::RateLimiter.window(unique("w"), 1, v)) },
          "RateLimiter.window(wait_timeout:)" => ->(v) { used(window(wait_timeout: v)) },
          "RateLimiter.window(sliding:)" => ->(v) { used(window(sliding: v)) },
          "RateLimiter.window(client:)" => ->(v) { used(window(client: v)) },
          "RateLimiter.window(sliding: true, count)" => lambda { |v|
            used(Ferrolock::RateLimiter.window(unique("s"), v, 1, sliding: true))
          },
          # A day: a count up to MAX_COUNT stays under one call per microsecond.
          "RateLimiter.bucket(count)" => ->(v) { used(Ferrolock::RateLimiter.bucket(unique("b"), v, :day)) },
          # Per second: a count above a million asks for more than one call per microsecond.
          "RateLimiter.bucket(count) per second" => ->(v) { used(Ferrolock::RateLimiter.bucket(unique("b"), v, 1)) },
          "RateLimiter.leaky(count) per second" => ->(v) { used(Ferrolock::RateLimiter.leaky(unique("l"), v, 1)) },
          "RateLimiter.bucket(interval)" => ->(v) { used(Ferrolock::RateLimiter.bucket(unique("b"), 1, v)) },
          "RateLimiter.leaky(count)" => ->(v) { used(Ferrolock::RateLimiter.leaky(unique("l"), v, :day)) },
          "RateLimiter.leaky(interval)" => ->(v) { used(Ferrolock::RateLimiter.leaky(unique("l"), 1, v)) },
          "RateLimiter.leaky(burst:)" => ->(v) { used(Ferrolock::RateLimiter.leaky(unique("l"), 1, :day, burst: v)) },
          "RateLimiter#within_limit(wait_timeout:)" => lambda { |v|
            Ferrolock::RateLimiter.window(unique("w"), 1, 1).within_limit(wait_timeout: v) { 1 }
          },
          "RateLimiter.points(points)" => ->(v) { used(Ferrolock::RateLimiter.points(unique("p"), v, :day)) },
          "RateLimiter#within_limit(cost) of points" => lambda { |v|
            Ferrolock::RateLimiter.points(unique("p"), 10, 1).within_limit(v, wait_timeout: 0) { 1 }
          },
          # Full for a day: every wait ends at once in OverLimit.
          "RateLimiter#within_limit(wait_timeout:) when full" => lambda { |v|
            limiter = Ferrolock::RateLimiter.window(unique("full"), 1, :day)
            limiter.within_limit { 1 }
            limiter.within_limit(wait_timeout: v) { 1 }
          }
        }
      end

      # UniqueClientMiddleware#call with one part of an otherwise sane job hash replaced by the
      # value (each case its own digest: nothing is a duplicate of an earlier case).
      def unique_targets
        {
          "UniqueClientMiddleware#call(job)" => ->(v) { push_unique(v) },
          "UniqueClientMiddleware job class" => ->(v) { push_unique(unique_job("class" => v), job_class: v) },
          "UniqueClientMiddleware job args" => ->(v) { push_unique(unique_job("args" => v)) },
          "UniqueClientMiddleware job args: [value]" => ->(v) { push_unique(unique_job("args" => [unique("a"), v])) },
          "UniqueClientMiddleware job jid" => ->(v) { push_unique(unique_job("jid" => v)) },
          "UniqueClientMiddleware job at" => ->(v) { push_unique(unique_job("at" => v)) },
          "UniqueClientMiddleware job lock" => ->(v) { push_unique(unique_job("lock" => v)) },
          "UniqueClientMiddleware job lock_ttl" => ->(v) { push_unique(unique_job("lock_ttl" => v)) },
          "UniqueClientMiddleware job lock_timeout" => ->(v) { push_unique(unique_job("lock_timeout" => v)) },
          "UniqueClientMiddleware job lock_lease" => ->(v) { push_unique(unique_job("lock_lease" => v)) },
          "UniqueClientMiddleware job on_conflict" => ->(v) { push_unique(unique_job("on_conflict" => v)) },
          "UniqueClientMiddleware job lock_args_method" => ->(v) { push_unique(unique_job("lock_args_method" => v)) },
          "UniqueServerMiddleware#call(job)" => lambda { |v|
            Ferrolock::Sidekiq::Unique::ServerMiddleware.new.call(UniqueJob.new, v, "default") { :ran }
          },
          "UniqueServerMiddleware.validate!(job class)" => ->(v) { validate_unique(v) }
        }
      end

      def targets(group)
        public_send("#{group}_targets")
      end

      # Runs every target of `group` (optionally only some values) with every value; prints one
      # JSON line per case.
      def run(group, only_values: nil)
        targets(group).each do |target, call|
          VALUES.each do |label, value|
            next if only_values && !only_values.fetch(target, VALUES.keys).include?(label)

            $stdout.puts(JSON.generate({ target: target, value: label }.merge(outcome(call, value))))
            $stdout.flush
          end
        end
      end

      def outcome(call, value)
        result = call.call(String === value && !value.frozen? ? value.dup : value) # rubocop:disable Style/CaseEquality -- BasicObject
        { outcome: "ok", result: Numeric === result ? result.to_f : nil } # rubocop:disable Style/CaseEquality
      rescue Exception => e # rubocop:disable Lint/RescueException -- `fatal` is what we look for
        # (A message may quote bytes that are not UTF-8; JSON takes UTF-8 only.)
        message = e.message[0, 300].encode(Encoding::UTF_8, invalid: :replace, undef: :replace)
        { outcome: e.class.name || e.class.inspect, message: message }
      end

      def configure(setting, value)
        Ferrolock.configure { |c| c.public_send("#{setting}=", value) }
      ensure
        Ferrolock.reset_config!
      end

      def shoryuken_configure(setting, value)
        Ferrolock::Shoryuken.configure { |c| c.public_send("#{setting}=", value) }
      ensure
        Ferrolock::Shoryuken.reset!
      end

      # Another thread holds the lock: the wait must end at its (tiny) deadline.
      def while_held_mutex
        name = unique("held")
        holder = Ferrolock::DistMutex.new(name)
        holder.synchronize do
          Thread.new do
            Thread.current.report_on_exception = false
            yield Ferrolock::DistMutex.new(name)
          end.value
        end
      end

      def while_full_limiter(wait, ctor_wait = 5)
        name = unique("full")
        limiter = Ferrolock::ConcurrentLimiter.new(name, 1)
        limiter.within_limit do
          Thread.new do
            Thread.current.report_on_exception = false
            other = Ferrolock::ConcurrentLimiter.new(name, 1, wait_timeout: ctor_wait)
            nil.equal?(wait) ? other.within_limit { 1 } : other.within_limit(wait_timeout: wait) { 1 }
          end.value
        end
      end

      def window(**options)
        Ferrolock::RateLimiter.window(unique("w"), 1, 1, **options)
      end

      def validate_unique(job_class)
        Ferrolock::Sidekiq::Unique::ServerMiddleware.validate!(job_class)
      end

      # A limiter that was just built, used once and read: the native side sees the values too.
      def used(limiter)
        limiter.within_limit(wait_timeout: 0) { 1 }
        limiter.status
        nil
      end

      def unique_job(**parts)
        { "class" => UniqueJob.name, "args" => [unique("a")], "jid" => unique("jid"), "queue" => "default",
          "lock" => "until_executed" }.merge(parts.transform_keys(&:to_s))
      end

      # True when the push went ahead (the block ran).
      def push_unique(job, job_class: UniqueJob.name)
        Ferrolock::Sidekiq::Unique::ClientMiddleware.new.call(job_class, job, "default") { true }
      end

      def limiter(**options)
        Ferrolock::ConcurrentLimiter.new(unique("l"), 1, **options)
      end

      def message_lock
        Ferrolock::Shoryuken::MessageLock.new
      end

      def admin
        @admin ||= Ferrolock::Admin.new
      end

      # A sane call with one argument replaced (a fresh jid: each case counts once).
      def queue_for(**given)
        arguments = { rules: [{ queue: "slow", threshold: 1_000, per: 60 }], job_class: "HostileJob",
                      tenant: "tenant", jid: unique("jid"), queue: "default" }.merge(given)
        Ferrolock::FairTenant.queue_for(arguments.delete(:rules), **arguments)
      end

      def fair_tenant_rules(threshold: 10, per: 60)
        Ferrolock::FairTenant::Rules.new([{ queue: "slow", threshold: threshold, per: per }])
      end

      def dual_lock_settings(**options)
        Ferrolock::Sidekiq::DualLock::Settings.new(JobClass.new("HostileJob", { "dual_lock" => options }), options)
      end

      # What the middleware would delay a job by when its backoff proc returned `value`.
      def limiter_backoff_delay(value)
        middleware = Ferrolock::Sidekiq::LimiterMiddleware.new(backoff: ->(*) { value })
        error = Ferrolock::OverLimit.new("full", limiter: nil)
        middleware.send(:delay_for, { "class" => "HostileJob" }, 1, error)
      end

      def dual_lock_backoff_delay(value)
        Ferrolock::Sidekiq::DualLock::Middleware.new(backoff: ->(*) { value }).send(:delay_for, 1, [nil, {}, nil])
      end
    end
  end
end
