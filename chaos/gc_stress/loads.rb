# frozen_string_literal: true

require "timeout"
require_relative "tally"
require_relative "fork_hold"

module Chaos
  module GcStress
    # Shared by the loads of one process: the client, the checks, the seed, the fork gate.
    class Env
      attr_reader :url, :client, :tally, :sections, :rng, :fork_gate

      def initialize(url:, client:, tally:, sections:, rng:, fork_gate:) # rubocop:disable Metrics/ParameterLists -- one holder of the six
        @url = url
        @client = client
        @tally = tally
        @sections = sections
        @rng = rng
        @fork_gate = fork_gate
      end
    end

    NAMESPACE = "gcstress"
    # Short, so a hold leaked by a bug frees itself within the run; renewed while held, so no
    # section outlives it.
    LEASE = 5
    # Every wait is bounded, so a worker that does not come back is hung, not waiting.
    WAIT = 2
    LIMIT = 2
    # What a storm or a Timeout raises into an op. Timeout 0.4 (Ruby 3.3) raises
    # Timeout::ExitException (not a StandardError) into the thread; one that fires as the block
    # ends, or that a release's deferral (Interrupts.release) holds back past it, lands in a
    # later op: normal, as for any code that defers interrupts.
    ASYNC = [StormError, Timeout::Error, (Timeout::ExitException if defined?(Timeout::ExitException))].compact.freeze

    # One kind of work: ops picked at random by weight. Each op returns :ok or :skipped, or raises;
    # #perform turns what it raised into an outcome.
    class Load
      def initialize(env)
        @env = env
        @tally = env.tally
        @sections = env.sections
        @client = env.client
      end

      def name
        self.class::NAME
      end

      def pick(rng)
        ops = self.class::OPS
        roll = rng.rand(ops.values.sum)
        ops.each do |op, weight|
          return op if (roll -= weight).negative?
        end
      end

      # Runs one op with asynchronous exceptions let through (the caller defers them elsewhere).
      def perform(action)
        outcome = Thread.handle_interrupt(Object => :immediate) { send(action) }
        @tally.count(name, action, outcome)
      rescue *ASYNC
        @tally.count(name, action, :interrupted)
      rescue Ferrolock::OverLimit, Ferrolock::TimeoutError
        @tally.count(name, action, :timed_out)
      rescue StandardError => e
        # Ferrolock::Error "interrupted before Redis answered": a storm cut a plain command short.
        interrupted = e.instance_of?(Ferrolock::Error) && e.message.include?("interrupted")
        interrupted ? @tally.count(name, action, :interrupted) : @tally.unexpected(name, action, e)
      end

      private

      # Something for the GC to move and free while the section is held: strings, arrays, a
      # hash, a short sleep or a thread switch.
      def work(rng = Random)
        junk = Array.new(rng.rand(1..40)) { |i| "#{i}-#{rng.rand(1 << 30)}" * rng.rand(1..4) }
        junk.each_slice(3).to_h { |a| [a.first, a] }
        # Kernel.sleep: MutexLoad has an op named sleep.
        rng.rand(3).zero? ? Kernel.sleep(rng.rand * 0.003) : Thread.pass
        junk.size
      end

      def rng
        Thread.current[:gc_stress_rng] ||= Random.new(@env.rng.rand(1 << 62))
      end
    end

    # DistMutex: every entry point, one object shared by the threads (Ruby Mutex's way) and
    # fresh objects of the same name; sections are never held by two threads at once, fencing
    # tokens never go back.
    class MutexLoad < Load
      NAME = "mutex"
      LOCK = "gc:mutex"
      OPS = { sync: 6, lock_unlock: 3, try_lock: 3, sleep: 2, timeout: 2, fresh: 1, fork_hold: 1 }.freeze

      def initialize(env)
        super
        @mutex = new_mutex
        @fence = Mutex.new
        @last_token = 0
        @fork_hold = ForkHold.new(env, @mutex, self)
      end

      # A section under the lock (held through `mutex`: ownership is per object, as with Ruby's
      # Mutex): checked for a second holder and a fencing token that went back.
      def section(mutex = @mutex)
        @sections.hold(:mutex) do
          check_token(mutex.fencing_token)
          work(rng)
        end
      end

      private

      def new_mutex
        Ferrolock::DistMutex.new(LOCK, lease: LEASE, client: @client)
      end

      def sync
        leaked_hold
        @mutex.synchronize(wait_timeout: WAIT) { section }
        :ok
      end

      def lock_unlock
        leaked_hold
        @mutex.lock(wait_timeout: WAIT)
        begin
          section
        ensure
          @mutex.unlock if @mutex.owned?
        end
        :ok
      end

      def try_lock
        leaked_hold
        return :skipped unless @mutex.try_lock

        begin
          section
        ensure
          @mutex.unlock if @mutex.owned?
        end
        :ok
      end

      # Mutex#sleep gives the lock up and takes it again: two sections, none while asleep.
      def sleep
        leaked_hold
        @mutex.synchronize(wait_timeout: WAIT) do
          section
          @mutex.sleep(rng.rand * 0.02)
          section
        end
        :ok
      end

      def timeout
        leaked_hold
        Timeout.timeout(rng.rand(0.001..0.05)) do
          @mutex.synchronize(wait_timeout: WAIT) { section && Kernel.sleep(rng.rand * 0.03) }
        end
        :ok
      end

      # Another object of the same lock: the process's owners are shared between them.
      def fresh
        leaked_hold
        mutex = new_mutex
        mutex.synchronize(wait_timeout: WAIT) { section(mutex) }
        :ok
      end

      def fork_hold
        leaked_hold
        @fork_hold.run
      end

      # A Thread#raise that lands between #lock returning and the harness's `begin` leaves this
      # thread holding (the harness's window, not the library's): given back before the next op.
      def leaked_hold
        @mutex.unlock if @mutex.owned?
      end

      def check_token(token)
        return @tally.problem("mutex: a holder has no fencing token") if token.nil?

        @fence.synchronize do
          @tally.problem("mutex: fencing token went back from #{@last_token} to #{token}") if token < @last_token
          @last_token = token if token > @last_token
        end
      end
    end

    # ConcurrentLimiter: never more than LIMIT blocks at once.
    class LimiterLoad < Load
      NAME = "limiter"
      OPS = { within: 6, no_wait: 2, timeout: 2, status: 1 }.freeze

      def initialize(env)
        super
        @limiter = Ferrolock::ConcurrentLimiter.new("gc:limiter", LIMIT, wait_timeout: WAIT, lease: LEASE,
                                                                         client: @client)
      end

      private

      def within
        @limiter.within_limit { @sections.hold(:limiter) { work(rng) } }
        :ok
      end

      def no_wait
        @limiter.within_limit(wait_timeout: 0) { @sections.hold(:limiter) { work(rng) } }
        :ok
      end

      def timeout
        Timeout.timeout(rng.rand(0.001..0.05)) do
          @limiter.within_limit { @sections.hold(:limiter) { work(rng) && Kernel.sleep(rng.rand * 0.03) } }
        end
        :ok
      end

      def status
        status = @limiter.status
        @tally.problem("limiter: status says #{status[:in_use]} in use (limit #{LIMIT})") if status[:in_use] > LIMIT
        :ok
      end
    end

    # DualLock: at most one runs at once; a skipped duplicate is normal.
    class DualLoad < Load
      NAME = "dual"
      OPS = { run: 6, timeout: 2, state: 1 }.freeze

      def initialize(env)
        super
        @dual = Ferrolock::DualLock.new("gc:dual", lease: LEASE, wait_lease: LEASE, wait_timeout: WAIT,
                                                   client: @client)
      end

      private

      def run
        @dual.run { @sections.hold(:dual) { work(rng) } } ? :ok : :skipped
      end

      def timeout
        ran = Timeout.timeout(rng.rand(0.001..0.05)) do
          @dual.run { @sections.hold(:dual) { work(rng) && Kernel.sleep(rng.rand * 0.03) } }
        end
        ran ? :ok : :skipped
      end

      def state
        @dual.executing?
        @dual.waiting?
        :ok
      end
    end

    # RateLimiter of each kind. The fixed window's grants are counted: no round may see more
    # than COUNT per second it lasted (plus the windows at its edges).
    class RateLoad < Load
      NAME = "rate"
      COUNT = 40
      OPS = { window: 3, sliding: 1, bucket: 2, leaky: 2, points: 2, status: 1 }.freeze

      def initialize(env)
        super
        short = { wait_timeout: 0.2, client: @client }
        @limiters = {
          window: Ferrolock::RateLimiter.window("gc:rate:window", COUNT, 1, **short),
          sliding: Ferrolock::RateLimiter.window("gc:rate:sliding", COUNT, 1, sliding: true, **short),
          bucket: Ferrolock::RateLimiter.bucket("gc:rate:bucket", COUNT, 1, **short),
          leaky: Ferrolock::RateLimiter.leaky("gc:rate:leaky", COUNT, 1, burst: 2, **short),
          points: Ferrolock::RateLimiter.points("gc:rate:points", COUNT, 1, **short)
        }
        @granted = 0
        @count_lock = Mutex.new
      end

      # Window grants since the last call.
      def take_granted
        @count_lock.synchronize { @granted.tap { @granted = 0 } }
      end

      private

      def window
        @limiters[:window].within_limit { @count_lock.synchronize { @granted += 1 } }
        :ok
      end

      %i[sliding bucket leaky].each do |kind|
        define_method(kind) do
          @limiters[kind].within_limit { work(rng) }
          :ok
        end
      end

      def points
        @limiters[:points].within_limit(rng.rand(1..5)) { work(rng) }
        :ok
      end

      def status
        @limiters.each do |kind, limiter|
          remaining = limiter.status[:remaining]
          @tally.problem("rate #{kind}: #{remaining} remaining of #{COUNT}") unless (0..COUNT).cover?(remaining)
        end
        :ok
      end
    end

    # Plain Ferrolock::Client calls: replies (binary, arrays, large) must come back intact.
    class ClientLoad < Load
      NAME = "client"
      OPS = { ping: 2, echo: 3, set_get: 3, mget: 2, hgetall: 1, big: 1, new_client: 1 }.freeze

      private

      def ping
        expect("PING", @client.ping, "PONG")
      end

      def echo
        payload = random_bytes(rng.rand(0..200))
        expect("ECHO", binary(@client.call("ECHO", payload)), payload)
      end

      # A key of its own per call (with an expiry), so no other call can change it.
      def set_get
        key = fresh_key
        value = random_bytes(rng.rand(1..64))
        expect("SET", @client.call("SET", key, value, "PX", 5000), "OK")
        expect("GET", binary(@client.call("GET", key)), value)
      end

      def mget
        keys = Array.new(rng.rand(1..8)) { fresh_key }
        keys.each { |key| @client.call("SET", key, key, "PX", 5000) }
        expect("MGET", @client.call("MGET", *keys), keys)
      end

      def hgetall
        key = fresh_key
        fields = Array.new(rng.rand(1..10)) { |i| ["f#{i}", rng.rand(1 << 40).to_s] }
        # One script, so a storm between two commands cannot leave a key without an expiry.
        @client.call("EVAL", "redis.call('HSET', KEYS[1], unpack(ARGV)) return redis.call('PEXPIRE', KEYS[1], 5000)",
                     1, key, *fields.flatten)
        reply = @client.call("HGETALL", key)
        # A map under RESP3, a flat array under RESP2.
        pairs = reply.is_a?(Hash) ? reply.to_a : reply.each_slice(2).to_a
        expect("HGETALL", pairs.sort, fields.sort)
      end

      def big
        value = random_bytes(64 * 1024)
        key = fresh_key
        @client.call("SET", key, value, "PX", 5000)
        expect("GET big", binary(@client.call("GET", key)), value)
      end

      # Native clients made and dropped all the time: freed by the GC while others run.
      def new_client
        client = Ferrolock::Client.new(url: @env.url, namespace: NAMESPACE)
        expect("PING (new client)", client.ping, "PONG")
      end

      def expect(what, got, want)
        return :ok if got == want

        @tally.problem("client: #{what} answered #{got.inspect[0, 80]}, expected #{want.inspect[0, 80]}")
        :ok
      end

      def fresh_key
        "#{NAMESPACE}:client:#{rng.rand(1 << 62).to_s(36)}"
      end

      # Replies are UTF-8 when they can be: compared as bytes (nil stays nil).
      def binary(reply)
        reply.is_a?(String) ? reply.b : reply
      end

      def random_bytes(size)
        rng.bytes(size)
      end
    end
  end
end

module Chaos
  module GcStress
    # The control: the same storm and compaction over Ruby's own Mutex, Mutex#sleep, Timeout,
    # Kernel#sleep (a blocking region with Ruby's own unblocking function) and forks,
    # with no ferrolock call. A crash here too is Ruby's, not the extension's.
    class ControlLoad < Load
      NAME = "control"
      OPS = { sync: 6, sleep: 2, timeout: 2, nap: 3, fork_hold: 1 }.freeze

      def initialize(env)
        super
        @mutex = Mutex.new
        @last_fork = 0.0
      end

      private

      def sync
        @mutex.synchronize { @sections.hold(:mutex) { work(rng) } }
        :ok
      end

      def sleep
        @mutex.synchronize do
          @sections.hold(:mutex) { work(rng) }
          @mutex.sleep(rng.rand * 0.02)
          @sections.hold(:mutex) { work(rng) }
        end
        :ok
      end

      def timeout
        Timeout.timeout(rng.rand(0.001..0.05)) do
          @mutex.synchronize { @sections.hold(:mutex) { work(rng) && Kernel.sleep(rng.rand * 0.03) } }
        end
        :ok
      end

      # A blocking sleep that the storm interrupts (Ruby's own unblocking function).
      def nap
        Kernel.sleep(rng.rand * 0.005)
        :ok
      end

      def fork_hold
        return :skipped unless @env.fork_gate.try_lock

        begin
          @mutex.synchronize { @sections.hold(:mutex) { fork_and_wait } }
        ensure
          @env.fork_gate.unlock
        end
      end

      def fork_and_wait
        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        return :skipped if now - @last_fork < ForkHold::GAP

        @last_fork = now
        pid = Process.fork do
          GC.compact
          work(rng)
          exit!(0)
        end
        Thread.handle_interrupt(Object => :never) { Process.wait(pid) }
        :ok
      end
    end
  end
end
