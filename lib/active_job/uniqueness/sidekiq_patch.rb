# frozen_string_literal: true

# activejob-uniqueness' Sidekiq patch path: frees a job's locks when Sidekiq's API deletes it (from
# a queue, the scheduled/retry/dead sets) and when it dies.
require "active_job/uniqueness"
require "ferrolock/active_job/uniqueness/sidekiq_patch"
