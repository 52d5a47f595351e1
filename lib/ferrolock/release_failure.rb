# frozen_string_literal: true

module Ferrolock
  # What the block forms do when a release fails (Redis unreachable or stalled) once the block is
  # over: a WARN line and a :release_failed event, never an exception. After a block that finished,
  # raising would turn finished work into a retry (Sidekiq runs the job again); after a block that
  # raised, it would hide the block's own exception. Nothing stays held for long: the release
  # already stopped the lease's renewal and was handed to the watchdog, which sends it again once
  # Redis answers, and the key expires with its TTL in any case.
  module ReleaseFailure
    module_function

    # error: the Ferrolock::Error the release raised; what: the primitive and name, for the log
    # line; finished: whether the block had finished (false: it raised); payload: the primitive's
    # event fields (primitive:, name: or key:, tags).
    def report(error, what:, finished:, **payload)
      outcome = finished ? :finished : :raised
      Ferrolock.log(:warn, "ferrolock: #{what}: release failed after the block #{outcome} " \
                           "(#{error.class}: #{error.message}); not raised, the lease is no longer " \
                           "renewed and expires by itself")
      Ferrolock.instrument(:release_failed, payload.merge(error: error.class.name, block: outcome))
    end
  end
end
