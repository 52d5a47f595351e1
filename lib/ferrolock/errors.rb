# frozen_string_literal: true

module Ferrolock
  # Base class of every error ferrolock raises (bad arguments raise Ruby's
  # ArgumentError/TypeError instead).
  class Error < StandardError; end

  # Redis unreachable, refused the connection or did not answer in time.
  class ConnectionError < Error; end

  # min_replicas_acked: fewer replicas than asked acknowledged a grant in time (see WAIT); the
  # grant was given back. A ConnectionError, so middlewares treat it like Redis being down.
  class ReplicationError < ConnectionError; end

  # A wait passed its deadline.
  class TimeoutError < Error; end

  # A held lease was lost (expired or taken over by another owner).
  class LockLost < Error; end

  # A limiter (ConcurrentLimiter or RateLimiter) refused within its wait timeout. #limiter is the
  # limiter that refused, so a backoff ->(limiter, job, ex) can depend on it; #retry_after is the
  # seconds until a rate limiter's next slot opens (nil when unknown, as for a ConcurrentLimiter,
  # whose slots free when their holders finish).
  class OverLimit < Error
    attr_reader :limiter, :retry_after

    def initialize(message = nil, limiter: nil, retry_after: nil)
      super(message)
      @limiter = limiter
      @retry_after = retry_after
    end
  end

  # A job's uniqueness lock is held by a duplicate (Sidekiq `on_conflict: :raise`): names the digest
  # and the job class.
  class UniqueConflict < Error
    attr_reader :digest, :job_class

    def initialize(message = nil, digest: nil, job_class: nil)
      super(message)
      @digest = digest
      @job_class = job_class
    end
  end
end
