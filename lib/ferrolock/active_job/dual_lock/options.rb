# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module DualLock
      # A job class's `dual_lock …` options: DualLockSettings' (checked when the macro runs) and
      # backoff:. The settings are made again at first use, so a `def self.dual_lock_key` written
      # after the macro counts.
      class Options
        attr_reader :backoff

        def initialize(job_class, options)
          @job_class = job_class
          @options = options.dup
          @backoff = Validate.callable!(:backoff, @options.delete(:backoff), "->(dual_lock, job, ex) { seconds }")
          settings # checks the options now
          @settings = nil
        end

        def settings
          @settings ||= Ferrolock::DualLockSettings.new(@job_class, @options.empty? ? true : @options)
        end

        # The job's key: the class's dual_lock_key(*arguments), a fixed key:, or class + digest of
        # the arguments as ActiveJob serializes them (records as GlobalIDs).
        def key_for(job)
          settings = self.settings
          return settings.key_for(job.arguments) if @job_class.respond_to?(DualLockSettings::KEY_METHOD)

          settings.key_for(::ActiveJob::Arguments.serialize(job.arguments))
        end
      end
    end
  end
end
