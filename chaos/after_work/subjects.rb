# frozen_string_literal: true

module Chaos
  module AfterWork
    # The block forms bin/chaos's after-work cases drive, one per primitive, behind one interface:
    # run { } (the block form), held? (Redis says someone holds it) and gone? (nothing it held is
    # left in Redis). `tag` keeps each case's names apart.
    module Subjects
      # DistMutex#synchronize.
      class Mutex
        def initialize(client, tag)
          @client = client
          @mutex = Ferrolock::DistMutex.new("after:mutex:#{tag}", lease: Settings::LEASE, client: client)
        end

        def prim = "dist_mutex"
        def run(&block) = @mutex.synchronize(&block)
        def held? = @mutex.locked?
        def gone? = !held?
      end

      # ConcurrentLimiter#within_limit (one slot).
      class Limiter
        def initialize(client, tag)
          @limiter = Ferrolock::ConcurrentLimiter.new("after:limiter:#{tag}", 1, wait_timeout: Settings::WAIT_TIMEOUT,
                                                                                 lock_timeout: Settings::LEASE,
                                                                                 client: client)
        end

        def prim = "concurrent_limiter"
        def run(&block) = @limiter.within_limit(&block)
        def held? = @limiter.status[:in_use].positive?
        def gone? = !held?
      end

      # DualLock#run (its EXEC stage).
      class Dual
        def initialize(client, tag)
          @lock = Ferrolock::DualLock.new("after:dual:#{tag}", wait_ttl: Settings::LEASE, exec_ttl: Settings::LEASE,
                                                               max_wait: Settings::MAX_WAIT, client: client)
        end

        def prim = "dual_lock"
        def run(&block) = @lock.run(&block)
        def held? = @lock.executing?
        def gone? = !held? && !@lock.waiting?
      end

      # Shoryuken MessageLock#process of one message; held?: in progress (a token in its state).
      class Message
        QUEUE = "after"

        def initialize(client, tag)
          @client = client
          @id = "m-#{tag}"
          @lock = Ferrolock::Shoryuken::MessageLock.new(lock_ttl: Settings::LEASE, processed_ttl: 60, client: client)
        end

        def prim = "message_lock"
        def run(&block) = @lock.process(QUEUE, @id, &block)

        def held?
          now = state
          !now.nil? && now != "processed"
        end

        # A processed message keeps its mark (processed_ttl): nothing in progress is left.
        def gone? = !held?
        def processed? = state == "processed"

        private

        def state
          @client.call("GET", @lock.state_key(QUEUE, @id))
        end
      end

      ALL = [Mutex, Limiter, Dual, Message].freeze
    end
  end
end
