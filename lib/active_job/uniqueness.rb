# frozen_string_literal: true

# The activejob-uniqueness gem's require path: ferrolock's drop-in for it (same API, keys and events).
require "ferrolock/active_job/uniqueness"

# ActiveJob::Uniqueness is ferrolock's module under the old gem's name.
module ActiveJob
  Uniqueness = Ferrolock::ActiveJob::Uniqueness unless const_defined?(:Uniqueness, false)
end
