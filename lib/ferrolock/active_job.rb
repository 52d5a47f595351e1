# frozen_string_literal: true

module Ferrolock
  # ActiveJob integrations that work on any adapter (through ActiveJob's callbacks alone). Inside
  # this namespace Rails' ActiveJob is always written ::ActiveJob. (Loaded on first reference:
  # lib/ferrolock.rb autoloads it; nothing here loads ActiveJob itself.)
  module ActiveJob
  end
end

require_relative "active_job/concurrency"
require_relative "active_job/dual_lock"
