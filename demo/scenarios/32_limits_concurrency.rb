# frozen_string_literal: true

require "active_job"
require "logger"

ActiveJob::Base.include(Ferrolock::ActiveJob::Concurrency) # what the Railtie does in a Rails app
ActiveJob::Base.logger = Logger.new(nil)

# Solid Queue's own example on ActiveJob's :async adapter (a thread pool of 8 here): at most 2
# announcements per account at once. A job that finds no free slot is parked in Redis, and the
# release that frees a slot enqueues the oldest parked job of that account.
module LimitsConcurrencyDemo
  JOBS_PER_ACCOUNT = 30
  SECONDS_PER_JOB = 0.04

  @guard = Mutex.new
  @inside = Hash.new(0)
  @peak = Hash.new(0)
  @performed = Hash.new { |h, k| h[k] = [] }

  class << self
    attr_reader :peak, :performed

    def reset
      @guard.synchronize { [@inside, @peak, @performed].each(&:clear) }
    end

    def perform(account, number)
      @guard.synchronize { @peak[account] = [@peak[account], @inside[account] += 1].max }
      sleep SECONDS_PER_JOB # delivering the announcements
      @guard.synchronize do
        @inside[account] -= 1
        @performed[account] << number
      end
    end

    def performed_count
      @guard.synchronize { @performed.values.sum(&:size) }
    end
  end

  class DeliverAnnouncementJob < ActiveJob::Base
    self.queue_adapter = ActiveJob::QueueAdapters::AsyncAdapter.new(min_threads: 1, max_threads: 8)
    limits_concurrency to: 2, key: ->(account, _number) { "demo-account-#{account}" }, duration: 60

    def perform(account, number)
      LimitsConcurrencyDemo.perform(account, number)
    end
  end
end

Demo.scenario("limits_concurrency: at most 2 per account on ActiveJob's :async adapter; 60 jobs, each once") do |report|
  demo = LimitsConcurrencyDemo
  demo.reset
  # Each parked job logs a "blocked by limits_concurrency" line: 56 of them here.
  level = Ferrolock.logger.level
  Ferrolock.logger.level = Logger::WARN
  started = Demo.monotonic
  %w[acme globex].each do |account|
    demo::JOBS_PER_ACCOUNT.times { |n| demo::DeliverAnnouncementJob.perform_later(account, n) }
  end
  total = 2 * demo::JOBS_PER_ACCOUNT
  sleep 0.01 until demo.performed_count == total || Demo.monotonic - started > 30
  elapsed = Demo.monotonic - started
  Ferrolock.logger.level = level
  best = demo::JOBS_PER_ACCOUNT * demo::SECONDS_PER_JOB / 2
  report.line("60 jobs for 2 accounts, 8 threads",
              format("%<took>.2f s (30 jobs of 40 ms, 2 at a time: %<best>.1f s at best)", took: elapsed, best: best))
  report.check("never more than 2 of one account at once", demo.peak.values.max == 2, "most: #{demo.peak}")
  once = demo.performed.values.all? { |numbers| numbers.sort == (0...demo::JOBS_PER_ACCOUNT).to_a }
  report.check("every job performed, and only once", demo.performed_count == total && once,
               "#{demo.performed_count} performs")
end
