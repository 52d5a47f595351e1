# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    # Prepended to ActiveJob::LogSubscriber (by ActiveJobHooks.install): the run of a job that
    # LimiterMiddleware rescheduled leaves ActiveJob's perform by a throw, which ActiveJob's
    # instrumentation cannot tell from success. Its "Performed <Job> …" line would say the job ran;
    # it did not, and LimiterMiddleware's own line already says what happened.
    module ActiveJobLogQuiet
      def perform(event)
        super unless ActiveJobHooks.rescheduled?(event.payload[:job])
      end
    end
  end
end
