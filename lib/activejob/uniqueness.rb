# frozen_string_literal: true

# activejob-uniqueness' other require path (Bundler's default for the gem's name).
require "active_job/uniqueness"
