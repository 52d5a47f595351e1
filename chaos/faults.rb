# frozen_string_literal: true

module Chaos
  # Injects one fault of a kind and returns what happened: { kind:, start:, end: } on the shared
  # clock (end: when the fault stopped acting, e.g. SIGCONT sent or the restarted Redis answers).
  class Faults
    KINDS = %i[kill_holder redis_sigstop script_flush restart_aof client_kill restart_wipe].freeze
    STOP_SECONDS = Settings::LEASE * 2 # a SIGSTOP longer than any lease

    def initialize(redis:, pool:)
      @redis = redis
      @pool = pool
    end

    def inject(kind)
      started = Chaos.now
      extra = public_send(kind) || {}
      { kind: kind, start: extra.delete(:start) || started, end: Chaos.now }.merge(extra)
    end

    # kill -9 of a worker process while it holds sections; a replacement worker starts.
    def kill_holder
      pid, held, killed_at = @pool.kill_a_holder
      { start: killed_at, pid: pid, held: held }
    end

    def redis_sigstop
      @redis.pause
      sleep STOP_SECONDS
      @redis.resume
      nil
    end

    def script_flush
      @redis.admin("SCRIPT", "FLUSH")
      nil
    end

    def client_kill
      @redis.admin("CLIENT", "KILL", "TYPE", "normal")
      nil
    end

    # kill -9 of Redis and a restart from its AOF (appendfsync always: nothing acknowledged is lost).
    def restart_aof
      @redis.restart(wipe: false)
      nil
    end

    # kill -9 of Redis and a restart with no data: every lock, slot and fencing counter is gone.
    def restart_wipe
      @redis.restart(wipe: true)
      nil
    end
  end
end
