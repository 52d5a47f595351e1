# frozen_string_literal: true

# ActiveJob on Sidekiq's adapter without Rails, for specs and fixture apps, on Sidekiq 6.4 and 7.3.
require "active_job"
require "sidekiq"

# Sidekiq 7.3 ships its own ActiveJob adapter (found before ActiveJob 6.1's on the load path) whose
# JobWrapper subclasses Sidekiq::ActiveJob::Wrapper; only sidekiq/rails defines that class, and
# sidekiq/rails needs railties, which the specs do not load. This is the same class, so jobs run
# through Sidekiq 7.3's real adapter as in a Rails app. (A plain, Rails-less ActiveJob app on 7.3
# has to do the same.)
if Gem::Version.new(Sidekiq::VERSION) >= Gem::Version.new("7.3") && !defined?(Sidekiq::ActiveJob::Wrapper)
  module Sidekiq
    module ActiveJob
      # Runs an ActiveJob job from its serialized data.
      class Wrapper
        include Sidekiq::Job

        def perform(job_data)
          ::ActiveJob::Base.execute(job_data.merge("provider_job_id" => jid))
        end
      end
    end
  end
end

# What Sidekiq's Rails integration does, so ActiveJob classes take sidekiq_options.
ActiveJob::Base.include(Sidekiq::Worker::Options) unless ActiveJob::Base.respond_to?(:sidekiq_options)
