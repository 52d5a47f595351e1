# frozen_string_literal: true

module Ferrolock
  module Testing
    # The backends of Testing.disable!: every lock, slot, turn and message is granted at once and
    # nothing is recorded, so nothing is ever seen held (the middlewares do not even call them).
    module Disabled
      # Native::DistMutex: granted; fencing tokens still grow, per object (none with fencing: false).
      class DistMutex
        # Seconds an untimed sleep lasts at most (see release_and_sleep).
        WAKE_EVERY = 1

        # Native::DistMutex.new's arguments: only the last, fencing, matters here.
        def initialize(*args)
          @fencing = args.last
          @fencing_token = 0
          @lock = ::Mutex.new
        end

        def lock(_timeout, _tally = nil)
          try_lock
        end

        def try_lock
          MutexHold.new(self, (@lock.synchronize { @fencing_token += 1 } if @fencing))
        end

        def unlock(_hold, _tally = nil) = nil
        def locked? = false
        def announce_release(_hold) = nil

        # DistMutex#sleep: nothing to release, so a plain sleep that any wake-up ends (false once
        # timeout passed). Without a timeout it also ends every WAKE_EVERY seconds (a spurious
        # wake-up, which Mutex#sleep allows): with every lock granted nothing is exclusive, so a
        # signal can come before the wait and would otherwise leave it asleep for good.
        def release_and_sleep(hold, timeout, deferred, _tally)
          hold.released_by_sleep = true
          return true unless deferred || !Thread.pending_interrupt?

          gate = ::Mutex.new
          gate.synchronize { Store.sleep_on(gate, timeout || WAKE_EVERY) } || timeout.nil?
        end
      end

      # Native::ConcurrentLimiter: a slot at once, whatever the limit.
      class ConcurrentLimiter
        attr_reader :limit

        def initialize(_client, _name, limit, *)
          @limit = limit
        end

        def acquire(_wait_timeout, _tally = nil) = LimiterSlot.new(self)
        def release(_slot, _tally = nil) = nil
        def status = [0, 0]
        def stored_limit = nil
      end

      # Native::RateLimiter: every call goes ahead now, with the full count left.
      class RateLimiter
        attr_reader :key

        def initialize(client, name, _kind, count, *)
          @key = client.key("rate:#{name}", "disabled")
          @count = count
        end

        def acquire(_cost, _wait_timeout) = [true, Testing.now, @count, SecureRandom.uuid]
        def refund(_id, _cost) = nil
        def record_definition = nil
        def status = [@count, 0.0]
      end

      # Native::DualLock: every duplicate runs.
      class DualLock
        attr_reader :key

        def initialize(_client, key, *)
          @key = key
        end

        def enter(_wait_timeout = nil) = DualLockTicket.new(self, :running)
        def wait(_ticket, _wait_timeout) = :running
        def leave(_ticket) = nil
        def state = [false, false]
      end

      # Native::UniqueLock: every take succeeds; nothing holds it afterwards.
      class UniqueLock
        attr_reader :key

        def initialize(client, digest)
          @key = client.key(digest, "lock")
        end

        def take(_jid, _ttl, _keep) = nil
        def release(_jid) = true
        def expire(_jid, _ttl) = true
        def hand_over(_from_jid, _to_jid, _ttl) = true
        def holder = nil
      end

      # Native::KeyLock: as UniqueLock, on a key taken as it is.
      class KeyLock < UniqueLock
        def initialize(_client, key) # rubocop:disable Lint/MissingSuper -- the key as it is
          @key = key
        end
      end

      # Native::MessageLock: every delivery runs.
      class MessageLock
        attr_reader :lease, :processed_ttl

        def initialize(client, lease, processed_ttl)
          @client = client
          @lease = lease
          @processed_ttl = processed_ttl
        end

        def begin_message(queue, message_id) = MessageLease.new(self, [queue, message_id])
        def finish(_lease) = :marked
        def abort_message(_lease) = true
        def state_key(queue, message_id) = @client.key("msg:#{queue}:#{message_id}", "state")
      end

      # Native::JobConcurrency: every job holds a slot at once, none is blocked (limits_concurrency
      # and concurrency_rule do not even call it: only a timer started in another mode does).
      class JobConcurrency
        def initialize(client)
          @client = client
          @fencing_token = 0
          @lock = ::Mutex.new
        end

        def admit(_key, _job_id, _payload, at_perform, _policy, _promotion) # rubocop:disable Metrics/ParameterLists -- the native's
          [:held, at_perform ? @lock.synchronize { @fencing_token += 1 } : 0, 0, []]
        end

        def running(key, job_id, _lease, fence) = JobSlot.new(self, key, job_id, fence)
        def release(slot, _limit) = slot.finish! ? [true, []] : nil
        def give_back(_key, _job_id, _limit, _promotion) = [true, []]
        def keep(slot) = slot.finish!
        def reap(_key, _claim) = []
        def due(_recheck) = [[], 0, nil]
        # Nothing is limited here, so nothing is overridden: none in force.
        def write_override(_key, _action, _limit) = [nil, false]
        def key_part(key, part) = @client.key("concurrency:#{key}", part)
        def due_key = @client.key("concurrency", "due")
        def lost?(_slot) = false
      end
    end
  end
end
