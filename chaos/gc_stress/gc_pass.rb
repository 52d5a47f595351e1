# frozen_string_literal: true

require "json"
require_relative "tally"
require_relative "loads"

module Chaos
  module GcStress
    # GC.stress = true (a GC at every allocation, so a Ruby object that native code uses without
    # the GC seeing it is freed at once) over the DistMutex and RateLimiter basics and a few plain
    # client calls, in two threads. Every allocation is a GC, so it stays small; a third of the
    # time GC.auto_compact is on too (each of those GCs also moves objects).
    class GcPass
      THREADS = 2

      def initialize(url:, seconds:, results:, seed:)
        @url = url
        @seconds = seconds
        @results = results
        @rng = Random.new(seed)
        @tally = Tally.new
        @sections = Sections.new(@tally, mutex: 1)
        @client = Ferrolock::Client.new(url: url, namespace: NAMESPACE)
        @client.ping
        @limiters = %i[window bucket leaky points].to_h { |kind| [kind, rate_limiter(kind)] }
      end

      def run
        deadline = now + @seconds
        compact_from = now + (@seconds * 2 / 3.0)
        GC.stress = true
        threads = Array.new(THREADS) { |i| Thread.new { loop_until(deadline, compact_from, i) } }
        threads.each(&:join)
        GC.stress = false
        GC.auto_compact = false
        finish
      end

      # GC.verify_compaction_references' arguments: expand_heap: true, toward: :empty (every object
      # that can move does). Ruby 3.1 (whose keyword is double_heap:) crashes by itself a few rounds
      # after such a verify when threads come and go (chaos/gc_stress/ruby31_crash.rb, no extension
      # loaded): there, a plain verify (compact, then check every reference).
      def self.verify_options
        names = GC.method(:verify_compaction_references).parameters.map(&:last)
        names.include?(:expand_heap) ? { expand_heap: true, toward: :empty } : {}
      end

      # Unblocking calls that came after their blocking region ended (builds that count them,
      # ext/ferrolock/src/unblock.rs); nil where the build has no counter.
      def self.stale_unblock_calls
        return unless defined?(Ferrolock::Native) && Ferrolock::Native.respond_to?(:stale_unblock_calls)

        Ferrolock::Native.stale_unblock_calls
      end

      private

      def loop_until(deadline, compact_from, index)
        while now < deadline
          GC.auto_compact = true if index.zero? && now > compact_from
          one_round(index)
          @tally.count("stress", GC.auto_compact ? "round (compacting)" : "round", :ok)
        end
      rescue StandardError => e
        @tally.unexpected("stress", "thread #{index}", e)
      end

      def one_round(index)
        mutex = Ferrolock::DistMutex.new("gc:stress:mutex", lease: LEASE, client: @client)
        step(:synchronize) { mutex.synchronize(wait_timeout: WAIT) { held } }
        step(:lock_unlock) do
          mutex.lock(wait_timeout: WAIT)
          held
          mutex.unlock
        end
        step(:try_lock) { mutex.try_lock && (held || true) && mutex.unlock }
        step(:sleep) do
          mutex.synchronize(wait_timeout: WAIT) do
            held
            mutex.sleep(0.001)
            held
          end
        end
        @limiters.each { |kind, limiter| step(kind) { limiter.within_limit(kind == :points ? 2 : 1) { held_rate } } }
        step(:client) { client_calls(index) }
      end

      def step(action)
        yield
        @tally.count("stress", action, :ok)
      rescue Ferrolock::OverLimit, Ferrolock::TimeoutError
        @tally.count("stress", action, :timed_out)
      rescue StandardError => e
        @tally.unexpected("stress", action, e)
      end

      def held
        @sections.hold(:mutex) { "x" * 10 }
      end

      def held_rate
        "y" * 10
      end

      def client_calls(index)
        key = "#{NAMESPACE}:stress:#{index}"
        value = @rng.bytes(32)
        @client.call("SET", key, value, "PX", 5000)
        got = @client.call("GET", key)
        @tally.problem("stress: GET answered #{got.inspect}") unless got&.b == value
        @tally.problem("stress: PING") unless @client.ping == "PONG"
      end

      def rate_limiter(kind)
        args = ["gc:stress:#{kind}", 1000, 1]
        case kind
        when :leaky then Ferrolock::RateLimiter.leaky(*args, wait_timeout: 0.2, burst: 5, client: @client)
        else Ferrolock::RateLimiter.public_send(kind, *args, wait_timeout: 0.2, client: @client)
        end
      end

      def finish
        report = @tally.to_h.merge(rounds: [], most_holders: @sections.most, mode: "stress", ruby: RUBY_DESCRIPTION,
                                   stale_unblock_calls: self.class.stale_unblock_calls)
        File.write(@results, JSON.generate(report))
        status = 0
        status = 4 unless report[:unexpected].empty?
        status = 2 unless report[:problems].empty?
        exit(status)
      end

      def now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end
