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

    # A Rails 8.1 continuable job class (ActiveJob::Continuable) with `limits` on a :test adapter whose
    # stopping? is `stopping.first` (a worker shutting down): perform(num) walks items 0 to 2, recording
    # [num, item, ferrolock_fence] in LC_RAN, with a checkpoint after each, where it is interrupted while
    # stopping and enqueues itself again at once (its resumption).
    def continuable(name, stopping, **limits)
      # (ActiveJob names an adapter by its class)
      adapter = stub_const("#{name}Adapter", Class.new(::ActiveJob::QueueAdapters::TestAdapter) do
        define_method(:stopping?) { stopping.first }
      end).new
      job_class(name, adapter: adapter, **limits) do
        include ::ActiveJob::Continuable

        self.resume_options = { wait: 0 }

        define_method(:perform) do |num|
          step(:items) do |step|
            (step.cursor || 0).upto(2) do |item|
              LC_RAN << [num, item, ferrolock_fence]
              step.set!(item + 1) # a checkpoint
            end
          end
        end
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
