# frozen_string_literal: true

require "timeout"

module Ferrolock
  # A StandardError that a `rescue StandardError` guarding the caller's own code must let through
  # unchanged: a timeout from outside the guarded code. On Ruby 3.1, `Timeout.timeout(sec, klass)`
  # (and a Thread#raise of any Timeout::Error) raises a StandardError in the middle of whatever runs;
  # rescued there, it becomes a log line, a fallback value or another error, and the outer timeout
  # never fires. (`Timeout.timeout(sec)` without a class throws instead, and Sidekiq::Shutdown and
  # Rack::Timeout's RequestTimeoutException are not StandardErrors: no rescue StandardError sees them.)
  # A timeout raised by the guarded code itself (Net::ReadTimeout) passes through too: its own
  # class says more than a wrapper would.
  #
  #   rescue ForeignError
  #     raise
  #   rescue StandardError => e
  #     # the guarded code's own failure
  module ForeignError
    def self.===(error)
      Timeout::Error === error # rubocop:disable Style/CaseEquality -- what `rescue Timeout::Error` tests
    end
  end
end
