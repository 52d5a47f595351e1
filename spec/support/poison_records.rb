# frozen_string_literal: true

require "active_job"
require "globalid"

GlobalID.app ||= "ferrolock-test"

# A record with a GlobalID, stored in the test Redis (a set of ids), so a job argument can be deleted
# while its job waits and every process (specs, Sidekiq apps) finds the same records. Each lookup is
# counted ("lc:finds:<id>"): how many times a job holding it was run; a lookup of a deleted one
# records when it failed, in Redis' clock ("lc:failed_at:<id>", µs).
class LcRecord
  include GlobalID::Identification

  IDS = "lc:records"

  attr_reader :id

  def initialize(id)
    @id = id.to_s
  end

  def self.create(id)
    Ferrolock.client.call("SADD", IDS, id.to_s)
    new(id)
  end

  # (GlobalID's locator) ActiveJob wraps what this raises in ActiveJob::DeserializationError.
  def self.find(id)
    Ferrolock.client.call("INCR", "lc:finds:#{id}")
    return new(id) if Ferrolock.client.call("SISMEMBER", IDS, id.to_s) == 1

    Ferrolock.client.call("SET", "lc:failed_at:#{id}", redis_micros)
    raise KeyError, "LcRecord #{id} was deleted"
  end

  def self.redis_micros
    seconds, micros = Ferrolock.client.call("TIME")
    (Integer(seconds) * 1_000_000) + Integer(micros)
  end

  def self.finds(id) = Ferrolock.client.call("GET", "lc:finds:#{id}").to_i

  def destroy = Ferrolock.client.call("SREM", IDS, id)
end
