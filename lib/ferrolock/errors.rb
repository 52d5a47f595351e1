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

  # A concurrency limit could not be entered within its wait timeout.
  class OverLimit < Error; end
end
