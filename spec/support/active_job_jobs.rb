# frozen_string_literal: true

require "active_job"
require "logger"

# What the jobs of the ActiveJob concurrency examples ran, in order.
LC_RAN = Queue.new

module FerrolockTest
  # Job classes under limits_concurrency, and their :test adapter's queue run in this process as a
  # worker would (ActiveJob::Base.execute on each payload).
  module ActiveJobJobs
    # A job class on `adapter` with `limits` (none: not limited) and `body` as its class body.
    def job_class(name, adapter: :test, **limits, &body)
      klass = Class.new(ActiveJob::Base) do
        include Ferrolock::ActiveJob::Concurrency
        self.queue_adapter = adapter
      end
      stub_const(name, klass)
      klass.limits_concurrency(**limits) unless limits.empty?
      klass.class_eval(&body) if body
      klass
    end

    # A job class whose perform(account, num) records [account, num, ferrolock_fence].
    def recording(name, **limits)
      job_class(name, **limits) do
        define_method(:perform) { |account, num| LC_RAN << [account, num, ferrolock_fence] }
      end
    end

    # Runs the block with these loggers for ActiveJob and ferrolock, and LC_RAN empty.
    def with_loggers(active_job: Logger.new(nil), ferrolock: Logger.new(nil))
      previous = [::ActiveJob::Base.logger, Ferrolock.config.logger]
      ::ActiveJob::Base.logger = active_job
      Ferrolock.config.logger = ferrolock
      LC_RAN.clear
      yield
    ensure
      ::ActiveJob::Base.logger, Ferrolock.config.logger = previous
    end

    def queue(klass) = klass.queue_adapter.enqueued_jobs

    def run_queued(klass) = ::ActiveJob::Base.execute(queue(klass).shift.transform_keys(&:to_s))

    # Runs the queued jobs, oldest first, until none is left (jobs that a release promotes are
    # queued meanwhile, and run in turn).
    def work_off(klass)
      run_queued(klass) until queue(klass).empty?
    end

    # What ran since the last call.
    def ran
      out = []
      out << LC_RAN.pop until LC_RAN.empty?
      out
    end
  end
end
