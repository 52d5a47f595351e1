# frozen_string_literal: true

module Ferrolock
  # The loaded Sidekiq job classes declaring a sidekiq_options key, for boot-time checks
  # (FairTenant.verify!, DualLock::Middleware.validate!). Eager-load the app first.
  module JobClasses
    # Classes reachable by their name only: a class replaced by code reloading, or anonymous,
    # is never pushed by name.
    def self.with_option(option)
      ObjectSpace.each_object(Class).select do |klass|
        klass.respond_to?(:get_sidekiq_options) && klass.get_sidekiq_options[option] &&
          klass.name && Object.const_get(klass.name).equal?(klass)
      rescue ForeignError
        raise # an outer timeout, not this class's failure: a boot check must not skip it silently
      rescue StandardError
        false # a class whose get_sidekiq_options or name raises cannot be checked by name
      end
    end

    # with_option, warning when none is loaded: a boot check that saw no class checked nothing.
    def self.found(option, check)
      classes = with_option(option)
      if classes.empty?
        Ferrolock.log(:warn, "ferrolock: #{check} found no loaded job class with #{option} in its " \
                             "sidekiq_options, so it checked nothing; eager-load the app first " \
                             "(Rails: config.eager_load = true, or Rails.application.eager_load!)")
      end
      classes
    end

    # Runs `check` (which raises ArgumentError/TypeError on bad options) for each of
    # `job_classes`, or of every loaded class with `option` when none is given, and raises every
    # error at once (raise_all!). A Sidekiq middleware's `validate!`.
    def self.check_all!(job_classes, option, check_name)
      job_classes = found(option, check_name) if job_classes.empty?
      errors = job_classes.filter_map do |job_class|
        yield job_class
        nil
      rescue ArgumentError, TypeError => e
        e
      end
      raise_all!(errors)
      true
    end

    # Raises the one error as is, or one ArgumentError listing several.
    def self.raise_all!(errors)
      return if errors.empty?
      raise errors.first if errors.size == 1

      raise ArgumentError, "#{errors.size} job classes have bad options:\n" \
                           "#{errors.map { |e| "  #{e.class}: #{e.message}" }.join("\n")}"
    end
  end
end
