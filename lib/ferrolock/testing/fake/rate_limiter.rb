# frozen_string_literal: true

require_relative "../fake"
require_relative "rate_algorithms"

module Ferrolock
  module Testing
    module Fake
      # Native::RateLimiter in memory, with the scripts' arithmetic (RateAlgorithms) in µs of
      # Testing.now. A call whose slot is later but within its wait reserves it and sleeps until
      # it (in real time, as Redis' clock runs); an exception during that sleep refunds the slot.
      class RateLimiter
        KEY_PARTS = { "window" => "window", "sliding_window" => "log", "bucket" => "bucket", "leaky" => "tat",
                      "points" => "points" }.freeze

        attr_reader :key

        def initialize(store, client, name, kind, count, interval, burst) # rubocop:disable Metrics/ParameterLists -- Native::RateLimiter.new's
          @store = store
          @key = client.key("rate:#{name}", KEY_PARTS.fetch(kind))
          @place = Fake.place(client, @key)
          @algorithm = RateAlgorithms.for(kind, count, interval * 1e6, burst)
        end

        # [true, slot (epoch seconds), calls left, id] or [false, seconds until the next slot].
        def acquire(cost, wait_timeout)
          id = SecureRandom.uuid
          @store.synchronize do
            granted, *rest = @algorithm.claim(state, Testing.now * 1e6, cost, wait_timeout * 1e6, id)
            next [false, rest[0] / 1e6] unless granted

            left, slot, wait = rest
            sleep_until_slot(wait / 1e6, id, cost)
            [true, slot / 1e6, left, id]
          end
        end

        def refund(id, cost)
          @store.synchronize { @algorithm.refund(state, id, cost) }
          nil
        end

        # Native::RateLimiter records its definition for the operators' view of Redis (Admin::RateInfo):
        # nothing to describe in memory.
        def record_definition = nil

        # [calls that would go ahead now, seconds until the full count is back]
        def status
          remaining, reset_in = @store.synchronize { @algorithm.status(state, Testing.now * 1e6) }
          [remaining, reset_in / 1e6]
        end

        private

        def state
          @store.table(:rate_limiter)[@place] ||= {}
        end

        def sleep_until_slot(seconds, id, cost)
          return if seconds <= 0

          deadline = Ferrolock.monotonic + seconds
          @store.await(deadline) { [nil, nil] }
        rescue Exception # rubocop:disable Lint/RescueException -- any exception ends the wait: the slot goes back
          @algorithm.refund(state, id, cost)
          raise
        end
      end
    end
  end
end
