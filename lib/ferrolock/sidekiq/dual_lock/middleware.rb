# frozen_string_literal: true

require "ferrolock"
require_relative "../reschedule"
require_relative "settings"
require_relative "../compat"

# Fails at `chain.add` (which loads this file) on a Sidekiq version ferrolock does not support.
Ferrolock::Sidekiq::Compat.check!

module Ferrolock
  module Sidekiq
    module DualLock
      # Sidekiq server middleware: "until and while executing" uniqueness for job classes that opt in
      # with `sidekiq_options dual_lock: true` (or a Hash, see Settings). Per key at most one
      # job runs and at most one waits; a further duplicate is skipped (logged at info, :skipped
      # event) and finishes without error, because the waiting one starts after it arrived and so
      # covers its trigger. A job that waited past wait_timeout is pushed again for later (same jid and
      # arguments, counter "ferrolock_dual_lock_waits" in the payload): not a retry, never dropped.
      # Enqueueing needs nothing: this runs on the workers only.
      #
      #   Sidekiq.configure_server do |config|
      #     config.server_middleware { |chain| chain.add Ferrolock::Sidekiq::DualLock::Middleware }
      #   end
      #
      # ActiveJob jobs sent through Sidekiq are keyed on the wrapped job class and its arguments.
      class Middleware
        COUNTER = "ferrolock_dual_lock_waits"
        OPTIONS = %i[client backoff].freeze

        # client: a Ferrolock::Client (default Ferrolock.client); backoff: ->(dual_lock, job, ex)
        # { seconds } before a rescheduled job comes back (as LimiterMiddleware's; default
        # Reschedule.backoff). A one-argument ->(count) { seconds } still works.
        def initialize(options = {})
          Compat.check!
          Validate.options!(options, OPTIONS, self.class.name)
          @client = nil.equal?(options[:client]) ? nil : Validate.client!(options[:client])
          @backoff = Validate.callable!(:backoff, options[:backoff], "->(dual_lock, job, ex) { seconds }")
        end

        # Checks job classes' dual_lock options now, at boot, raising what their first job would:
        #
        #   Sidekiq.configure_server { |c| c.on(:startup) { Ferrolock::Sidekiq::DualLock::Middleware.validate! } }
        #
        # With no classes given: every loaded class with a dual_lock option (eager-load first; finding
        # none logs a warning). Every bad class is reported: one error raises as is, several raise one
        # ArgumentError listing them all.
        def self.validate!(*job_classes)
          JobClasses.check_all!(job_classes, "dual_lock", "DualLock::Middleware.validate!") do |job_class|
            case job_class
            when Module then Settings.for(job_class)
            else raise TypeError, "DualLock::Middleware.validate! takes job classes, got #{Validate.show(job_class)}"
            end
          end
        end

        def call(worker, job, queue, &block)
          return yield if Backend.pass_through? # Ferrolock::Testing.disable!

          job_class, args = self.class.unwrap(worker, job)
          settings = Settings.for(job_class)
          return yield unless settings

          run_locked(settings, settings.key_for(args), job, queue, &block)
        end

        # [job class (its name when not loaded here), arguments] (Ferrolock::Job.from_sidekiq).
        def self.unwrap(worker, job)
          model = Job.from_sidekiq(job, worker.class)
          [model.job_class, model.arguments || []]
        end

        private

        def run_locked(settings, key, job, queue)
          lock = Ferrolock::DualLock.new(key, lease: settings.lease, wait_lease: settings.wait_lease,
                                              wait_timeout: settings.wait_timeout, client: @client)
          entered = false
          tags = { class: Sidekiq.job_class_name(job), jid: job["jid"], queue: queue }
          ran = lock.run(tags: tags) do
            entered = true
            yield
          end
          skipped(job, key) unless ran
        rescue Ferrolock::TimeoutError => e
          raise if entered # the job's own timeout, not the wait

          reschedule(job, key, queue, settings, backoff_args: [lock, job, e])
        rescue Ferrolock::LockLost => e
          raise unless entered

          # The job has run; failing it now would only run it again. The :lock_lost event is out.
          Ferrolock.log(:warn, "ferrolock: #{label(job)} ran without exclusivity: #{e.message}")
        end

        def skipped(job, key)
          Ferrolock.log(:info, "ferrolock: #{label(job)} skipped: a duplicate already waits to run after the " \
                               "current one (dual_lock key #{key.inspect})")
        end

        def reschedule(job, key, queue, settings, backoff_args:)
          count = job.fetch(COUNTER, 0).to_i + 1
          delay = delay_for(count, backoff_args)
          Reschedule.call(job, delay: delay, counter: COUNTER)
          Ferrolock.log(:info, "ferrolock: #{label(job)} waited #{settings.wait_timeout} s for its duplicate to " \
                               "finish; #{Reschedule.due(delay)} (dual_lock key #{key.inspect}, #{count} so far)")
          Ferrolock.instrument(:rescheduled, primitive: :dual_lock, key: key, reason: :wait_timeout,
                                             class: Sidekiq.job_class_name(job),
                                             jid: job["jid"], queue: queue, count: count, delay: delay)
        end

        # The backoff proc's answer, or the default (see Reschedule.delay). A one-argument proc
        # gets the count (the older form).
        def delay_for(count, backoff_args)
          Reschedule.delay(count, @backoff, "dual_lock") do
            one_argument = @backoff.respond_to?(:arity) && @backoff.arity == 1
            one_argument ? @backoff.call(count) : @backoff.call(*backoff_args)
          end
        end

        def label(job)
          Sidekiq.job_label(job)
        end
      end
    end
  end
end
